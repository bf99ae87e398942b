//! What the steps of a plan do (`plan::Step`), each beside what it works
//! on: a turn's servers and watcher, a cage's limits and rules, an
//! outbox's archive on its way, a drop stored. Below the verbs: nothing
//! here imports the executor (`plan`) or an operation's own file (`exec`,
//! `limits`, `outbox`, `files`, ...), so that the executor runs steps it
//! knows nothing of, and the verbs decide them.

pub mod cage_files;
pub mod drop;
pub mod limits;
pub mod send;
pub mod turn;
