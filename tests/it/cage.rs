//! End-to-end tests of ordinary cages, as root, against real podman.

use crate::common::*;
