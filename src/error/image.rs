//! An image for a cage missing, or one of our images not built, and why.

use std::path::PathBuf;

use super::{Error, Face, Kind};

/// What went wrong with an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageProblem {
    /// No image of that name on this machine for the session's cage;
    /// `named`: the request named it (bad input), else the config's
    /// (failed).
    Missing { image: String, named: bool },
    /// ... gone while the cage was made.
    RemovedMeanwhile { image: String },
    /// mmdebstrap, which makes the workbench's base, is not installed.
    NoMmdebstrap,
    /// mmdebstrap failed (`status`: its exit status, none for a signal;
    /// `said`: the line of its output that says why, if any).
    MmdebstrapFailed { status: Option<i32>, said: String },
    /// A build worker's job that is not `STAGE:FD`.
    NotAJob { job: String },
    /// The build lock's descriptor, not passed on to the build worker.
    LockNotPassed { fd: i32 },
    /// ... or a descriptor that is not the build lock at `path`.
    NotTheLock { fd: i32, path: PathBuf },
    /// The builds of one worker that failed, each its own error.
    Builds(Vec<Error>),
}

impl ImageProblem {
    pub(super) fn words(&self, face: Face) -> String {
        match self {
            ImageProblem::Missing { image, .. } => {
                format!("there is no image {image} on this machine for this session's cage")
            }
            ImageProblem::RemovedMeanwhile { image } => format!(
                "there is no image {image} on this machine for this session's cage (it was \
                 removed while the cage was being made)"
            ),
            ImageProblem::NoMmdebstrap => {
                "the workbench's base is made with mmdebstrap, which is not installed: install \
                 it (Debian: apt-get install mmdebstrap), or make the cage from another image \
                 (the config's `image`)"
                    .to_string()
            }
            ImageProblem::MmdebstrapFailed { status, said } => format!(
                "mmdebstrap ended with {}: {}",
                status
                    .map(|c| format!("status {c}"))
                    .unwrap_or_else(|| "a signal".into()),
                if said.is_empty() {
                    "(it said nothing)"
                } else {
                    said
                }
            ),
            ImageProblem::NotAJob { job } => format!("{job:?} is not STAGE:FD"),
            ImageProblem::LockNotPassed { fd } => {
                format!("the build lock descriptor {fd} was not passed on")
            }
            ImageProblem::NotTheLock { fd, path } => {
                format!("descriptor {fd} is not the build lock {}", path.display())
            }
            ImageProblem::Builds(errors) => errors
                .iter()
                .map(|e| e.said(face))
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    pub(super) fn kind(&self) -> Kind {
        match self {
            ImageProblem::Missing { named: true, .. } | ImageProblem::NotAJob { .. } => {
                Kind::BadInput
            }
            _ => Kind::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each problem in the words and exit code it had when it was made as a
    /// sentence where it was found.
    #[test]
    fn every_image_problem_is_worded_as_before() {
        assert_eq!(
            Error::image(ImageProblem::RemovedMeanwhile {
                image: "i:1".into()
            })
            .message(),
            "there is no image i:1 on this machine for this session's cage (it was removed while \
             the cage was being made)"
        );
        assert_eq!(
            Error::image(ImageProblem::NotTheLock {
                fd: 4,
                path: PathBuf::from("/s/build.lock")
            })
            .message(),
            "descriptor 4 is not the build lock /s/build.lock"
        );
        let w = |p| Error::image(p).message();
        let missing = |named| ImageProblem::Missing {
            image: "localhost/x:1".into(),
            named,
        };
        assert_eq!(
            w(missing(true)),
            "there is no image localhost/x:1 on this machine for this session's cage"
        );
        assert_eq!(Error::image(missing(true)).kind.exit_code(), 2);
        assert_eq!(Error::image(missing(false)).kind.exit_code(), 1);
        assert_eq!(
            w(ImageProblem::MmdebstrapFailed {
                status: Some(100),
                said: "E: no mirror".into()
            }),
            "mmdebstrap ended with status 100: E: no mirror"
        );
        assert_eq!(
            w(ImageProblem::MmdebstrapFailed {
                status: None,
                said: String::new()
            }),
            "mmdebstrap ended with a signal: (it said nothing)"
        );
        assert_eq!(
            w(ImageProblem::NotAJob { job: "x".into() }),
            "\"x\" is not STAGE:FD"
        );
        assert_eq!(
            w(ImageProblem::Builds(vec![
                Error::image(ImageProblem::NoMmdebstrap),
                Error::image(ImageProblem::LockNotPassed { fd: 5 })
            ])),
            "the workbench's base is made with mmdebstrap, which is not installed: install it \
             (Debian: apt-get install mmdebstrap), or make the cage from another image (the \
             config's `image`); the build lock descriptor 5 was not passed on"
        );
    }
}
