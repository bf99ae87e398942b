//! What the tool keeps on disk: the session records and their locks, and the
//! times it writes (Unix seconds kept, RFC 3339 and local time shown).

pub mod lock;
pub mod session;
pub mod when;
