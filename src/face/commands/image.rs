//! `image`: build our images and show how they stand.

use std::io::IsTerminal;
use std::process::ExitCode;

use crate::error::Result;
use crate::face::cli::ImageCommand;
use crate::face::output;
use crate::ops::{self, Context};

pub fn run(ctx: &Context, cmd: ImageCommand, json: bool) -> Result<ExitCode> {
    match cmd {
        ImageCommand::Build(a) => {
            let req = ops::image::BuildRequest::from(a);
            let tty = std::io::stderr().is_terminal();
            let r = if tty && !json && req.wait {
                build_with_progress(ctx, &req)?
            } else {
                ops::image::build(ctx, &req, &mut |e| output::image_event(&e, tty))?
            };
            output::show(&r, json, output::image_built);
        }
        ImageCommand::Status => {
            let r = ops::image::status(ctx)?;
            output::show(&r, json, output::image_status);
        }
        ImageCommand::BuildWorker { jobs } => ops::image::worker(ctx, &jobs)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `image build --wait` on a terminal: one progress line, rewritten as
/// each step starts and once a second (a long RUN step prints nothing for
/// minutes), by a thread of its own that stops when the build returns.
fn build_with_progress(
    ctx: &Context,
    req: &ops::image::BuildRequest,
) -> Result<ops::image::BuildReport> {
    use std::io::Write;
    use std::sync::{Mutex, mpsc};
    let progress = Mutex::new(output::Progress::new());
    let write = |text: String| {
        if !text.is_empty() {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(text.as_bytes());
            let _ = err.flush();
        }
    };
    let (done, stop) = mpsc::channel::<()>();
    let (progress, write) = (&progress, &write);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) =
                stop.recv_timeout(std::time::Duration::from_secs(1))
            {
                let p = progress.lock().unwrap_or_else(|p| p.into_inner());
                write(p.tick(output::stderr_width()));
            }
        });
        let built = ops::image::build(ctx, req, &mut |e| {
            let mut p = progress.lock().unwrap_or_else(|p| p.into_inner());
            write(p.event(&e, output::stderr_width()));
        });
        drop(done);
        built
    })
}
