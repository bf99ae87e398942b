//! `completions SHELL`: the script that registers the completions with a
//! shell.

use std::process::ExitCode;

use crate::error::{Error, Result};
use crate::face::output;

/// The variable the completion scripts set when they ask for candidates.
pub const COMPLETE_VAR: &str = "SHROOMS_AGENT_COMPLETE";

pub fn run(shell: clap_complete::Shell) -> Result<ExitCode> {
    output::raw(&completion_script(shell)?);
    Ok(ExitCode::SUCCESS)
}

/// The script that registers the completions with a shell: at each Tab it
/// runs `shrooms-agent` with SHROOMS_AGENT_COMPLETE set, and clap_complete's
/// engine answers from the command definition and the session names.
fn completion_script(shell: clap_complete::Shell) -> Result<Vec<u8>> {
    use clap_complete::Shell;
    use clap_complete::env::{Bash, Elvish, EnvCompleter, Fish, Powershell, Zsh};
    let completer: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
        Shell::Elvish => &Elvish,
        Shell::PowerShell => &Powershell,
        other => {
            return Err(Error::input(crate::error::InputProblem::NoCompletions {
                shell: other.to_string(),
            }));
        }
    };
    let mut out = Vec::new();
    completer
        .write_registration(
            COMPLETE_VAR,
            "shrooms-agent",
            "shrooms-agent",
            "shrooms-agent",
            &mut out,
        )
        .map_err(|e| Error::act("writing the completion script", &e))?;
    if shell == Shell::Zsh {
        out.extend_from_slice(ZSH_AUTOLOADED.as_bytes());
    }
    Ok(out)
}

/// Appended to the zsh script. Installed as `_shrooms-agent` in a folder on
/// `$fpath` (the package's /usr/share/zsh/vendor-completions, `~/.zfunc`),
/// compinit autoloads the file as that function's body at the first Tab:
/// clap_complete's script there only defines its completer and registers
/// it, so the first Tab of every new shell offered nothing (seen with zsh
/// 5.9). Run from there, it completes that Tab too; sourced, it does not.
const ZSH_AUTOLOADED: &str = r#"
if [[ ${funcstack[1]-} == _shrooms-agent ]]; then
    _clap_dynamic_completer_shrooms_agent "$@"
fi
"#;
