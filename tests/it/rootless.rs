//! End-to-end tests as an unprivileged user with rootless podman.

use crate::common::*;
