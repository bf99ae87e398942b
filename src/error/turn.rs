//! What a turn's process starts beside its cage not started as it must be:
//! the watcher that stops the cage if the process is killed, a descriptor
//! handed to a helper, the model gateway's listener. Each a failure (exit
//! 1).

/// Why the watcher of a turn did not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatcherSilent {
    /// It wrote something other than its ready byte.
    SaidElse,
    /// It ended, or said nothing within `secs` seconds.
    Quiet { secs: u64 },
}

/// What went wrong beside a turn's cage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnProblem {
    /// The watcher did not say it was ready.
    WatcherNotStarted(WatcherSilent),
    /// A descriptor a helper was to be handed was not passed on.
    NotPassed { fd: i32 },
    /// ... or is not a pipe.
    NotAPipe { fd: i32 },
    /// The gateway's helper ended without handing its socket over.
    NoHandover,
    /// ... or handed over one bound to `addr`, not loopback.
    NotLoopback { addr: std::net::SocketAddr },
}

impl TurnProblem {
    pub(super) fn words(&self) -> String {
        let gateway = "opening the model gateway in the cage";
        match self {
            TurnProblem::WatcherNotStarted(why) => format!(
                "the watcher that stops the cage if this process is killed did not start: {}",
                match why {
                    WatcherSilent::SaidElse => "it said something else".to_string(),
                    WatcherSilent::Quiet { secs } => {
                        format!("it ended or did not answer within {secs}s")
                    }
                }
            ),
            TurnProblem::NotPassed { fd } => format!("descriptor {fd} was not passed on"),
            TurnProblem::NotAPipe { fd } => format!("descriptor {fd} is not a pipe"),
            TurnProblem::NoHandover => {
                format!("{gateway}: the helper did not hand the socket over")
            }
            TurnProblem::NotLoopback { addr } => {
                format!("{gateway}: the socket handed over is bound to {addr}, not loopback")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each problem in the words it had when it was made as a sentence
    /// where it was found; each a failure (exit 1).
    #[test]
    fn every_turn_problem_is_worded_as_before() {
        let w = |p| Error::turn(p).message();
        assert_eq!(
            w(TurnProblem::WatcherNotStarted(WatcherSilent::Quiet {
                secs: 10
            })),
            "the watcher that stops the cage if this process is killed did not start: it ended \
             or did not answer within 10s"
        );
        assert_eq!(
            w(TurnProblem::NotLoopback {
                addr: "0.0.0.0:4000".parse().unwrap()
            }),
            "opening the model gateway in the cage: the socket handed over is bound to \
             0.0.0.0:4000, not loopback"
        );
        assert_eq!(
            w(TurnProblem::NotAPipe { fd: 5 }),
            "descriptor 5 is not a pipe"
        );
        assert_eq!(Error::turn(TurnProblem::NoHandover).kind.exit_code(), 1);
    }
}
