//! What the tool keeps on disk: the session records and their locks, what
//! the day's turns spent, and the times it writes (Unix seconds kept, RFC
//! 3339 and local time shown).

pub mod lock;
pub mod session;
pub mod spend;
pub mod when;
