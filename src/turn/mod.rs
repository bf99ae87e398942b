//! The servers a turn talks to: the model gateway, the cage's socket, the
//! shrooms tools (MCP), and the one server shell they and serve run in.

pub mod cage_socket;
pub mod gateway;
pub mod mcp;
pub mod server;
