//! A cage's first process (PID 1): starts nothing, reaps the children the
//! kernel gives it, and is not dumpable, so that no process of the cage
//! can trace it or open its memory. It ends when SIGKILL comes from
//! outside (a cage's stop signal): the first process of a PID namespace
//! gets from inside it only the signals it has a handler for, or blocks
//! (pid_namespaces(7), signal(7)), and this one has none and blocks only
//! SIGCHLD.
//!
//! Built by build.rs as a program of its own, linked statically (an image
//! may have no C library), and put by shrooms-agent in its state folder's
//! `tools/`, from where every cage mounts it read-only (docs/cages.md, "Nothing of
//! the cage runs before its rules").
//!
//! Why not dumpable: root in a cage runs with PID 1's own user id, and
//! ptrace(2) ("Ptrace access mode checking") lets a process trace, and open
//! `/proc/PID/mem` of, a process of its own user id that is dumpable; one
//! that is not needs CAP_SYS_PTRACE in the process's user namespace, which
//! no cage has. prctl(2) PR_SET_DUMPABLE makes it so for this process's
//! life: only an execve(2) or a change of its credentials sets it back,
//! and this program does neither.
//!
//! No crate but std: it is compiled alone, by rustc, without cargo. The few
//! C library calls are declared here; each is one system call of glibc's.
#![deny(unsafe_op_in_unsafe_fn)]

use std::ffi::c_int;

/// glibc's `sigset_t`: 1024 bits.
#[repr(C)]
struct SigSet([u64; 16]);

unsafe extern "C" {
    fn prctl(option: c_int, arg2: std::ffi::c_ulong, ...) -> c_int;
    fn sigemptyset(set: *mut SigSet) -> c_int;
    fn sigaddset(set: *mut SigSet, sig: c_int) -> c_int;
    fn sigprocmask(how: c_int, set: *const SigSet, old: *mut SigSet) -> c_int;
    fn sigwait(set: *const SigSet, sig: *mut c_int) -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
}

const PR_SET_DUMPABLE: c_int = 4;
const PR_GET_DUMPABLE: c_int = 3;
const SIG_BLOCK: c_int = 0;
const WNOHANG: c_int = 1;
const SIGCHLD: c_int = 17;

fn main() {
    // SAFETY: prctl with PR_SET_DUMPABLE takes one integer argument, given;
    // it changes only this process's dumpable flag.
    let set = unsafe { prctl(PR_SET_DUMPABLE, 0) };
    // SAFETY: PR_GET_DUMPABLE takes no pointer and reads a flag.
    if set != 0 || unsafe { prctl(PR_GET_DUMPABLE, 0) } != 0 {
        eprintln!("shrooms-init: could not make itself non-dumpable");
        std::process::exit(1);
    }
    let mut child = SigSet([0; 16]);
    // SAFETY: `child` is a sigset_t-sized buffer these calls write; the
    // mask is then this thread's, the process's only one.
    unsafe {
        sigemptyset(&mut child);
        sigaddset(&mut child, SIGCHLD);
        sigprocmask(SIG_BLOCK, &child, std::ptr::null_mut());
    }
    loop {
        let mut sig: c_int = 0;
        // SAFETY: both pointers are to live values of the right types.
        if unsafe { sigwait(&child, &mut sig) } != 0 {
            continue;
        }
        loop {
            let mut status: c_int = 0;
            // SAFETY: `status` is a live c_int; -1 waits for any child.
            if unsafe { waitpid(-1, &mut status, WNOHANG) } <= 0 {
                break;
            }
        }
    }
}
