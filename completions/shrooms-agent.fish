# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_shrooms_agent_global_optspecs
    string join \n json h/help V/version
end

function __fish_shrooms_agent_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_shrooms_agent_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_shrooms_agent_using_subcommand
    set -l cmd (__fish_shrooms_agent_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -s V -l version -d 'Print version'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "cage" -d 'Make, run, inspect and remove caged sessions'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "doctor" -d 'Check this machine: podman, rootless, cgroups, network, nft, seccomp, image'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "outbox" -d 'Read what a sealed session left in its outbox'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "completions" -d 'Print a shell completion script to standard output'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "man" -d 'Print the man page (roff) to standard output'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -f -a "create" -d 'Record a session and make its container (made, not started)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -f -a "start" -d 'Start a session\'s container and close the agent port inside it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -f -a "stop" -d 'Stop a session\'s container, and everything running in it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -f -a "rm" -d 'Remove a session: its container, env file, private folders and record'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -f -a "exec" -d 'Run a command in a session\'s cage; the cage stops when it ends'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -f -a "run" -d 'Run the session\'s harness (claude or pi) in its cage'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -f -a "ls" -d 'List the caged sessions, and containers left over without one'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -f -a "show" -d 'Show a session: its record, its container\'s state and the argv it was made with'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -f -a "prune" -d 'Remove leftover containers (labelled, with no session) and env files with no session'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm exec run ls show prune help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l dir -d 'The project folder; mounted read-write at its own path' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l harness -d 'The harness the session runs' -r -f -a "claude\t''
pi\t''"
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l image -d 'The image (default: the config\'s `image`, else localhost/shrooms-workbench:latest)' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l sealed-token -d 'The machine\'s sealed token (default: the config\'s `sealed_token`, else sealed-claude-token in the state folder)' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l conversation -d 'Bring this Claude Code conversation of the project into the sealed cage: its transcript and the folder beside it are copied in, no other' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l dry-run -d 'Print the podman argv and the env file (secrets redacted), and change nothing'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l sealed -d 'Seal it, for code nobody vouches for: the internet and nothing local, its own login, no user namespaces, results only through its outbox'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from start" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from start" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from stop" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from stop" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from rm" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from rm" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from exec" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from exec" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from run" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from ls" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from ls" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from show" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from prune" -l dry-run -d 'Say what would be removed, and remove nothing'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from prune" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from prune" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "create" -d 'Record a session and make its container (made, not started)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "start" -d 'Start a session\'s container and close the agent port inside it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "stop" -d 'Stop a session\'s container, and everything running in it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "rm" -d 'Remove a session: its container, env file, private folders and record'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "exec" -d 'Run a command in a session\'s cage; the cage stops when it ends'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "run" -d 'Run the session\'s harness (claude or pi) in its cage'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "ls" -d 'List the caged sessions, and containers left over without one'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "show" -d 'Show a session: its record, its container\'s state and the argv it was made with'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "prune" -d 'Remove leftover containers (labelled, with no session) and env files with no session'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand doctor" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and not __fish_seen_subcommand_from pack help" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and not __fish_seen_subcommand_from pack help" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and not __fish_seen_subcommand_from pack help" -f -a "pack" -d 'Pack a sealed session\'s outbox into a .tar.gz: regular files only, links never followed, with a README-UNTRUSTED.txt listing what was left out'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and not __fish_seen_subcommand_from pack help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from pack" -s o -l output -d 'The archive to write' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from pack" -l only -d 'Pack only this folder of the outbox (a relative path)' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from pack" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from pack" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from help" -f -a "pack" -d 'Pack a sealed session\'s outbox into a .tar.gz: regular files only, links never followed, with a README-UNTRUSTED.txt listing what was left out'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand completions" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand completions" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand man" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand man" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor outbox completions man help" -f -a "cage" -d 'Make, run, inspect and remove caged sessions'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor outbox completions man help" -f -a "doctor" -d 'Check this machine: podman, rootless, cgroups, network, nft, seccomp, image'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor outbox completions man help" -f -a "outbox" -d 'Read what a sealed session left in its outbox'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor outbox completions man help" -f -a "completions" -d 'Print a shell completion script to standard output'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor outbox completions man help" -f -a "man" -d 'Print the man page (roff) to standard output'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor outbox completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "create" -d 'Record a session and make its container (made, not started)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "start" -d 'Start a session\'s container and close the agent port inside it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "stop" -d 'Stop a session\'s container, and everything running in it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "rm" -d 'Remove a session: its container, env file, private folders and record'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "exec" -d 'Run a command in a session\'s cage; the cage stops when it ends'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "run" -d 'Run the session\'s harness (claude or pi) in its cage'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "ls" -d 'List the caged sessions, and containers left over without one'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "show" -d 'Show a session: its record, its container\'s state and the argv it was made with'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "prune" -d 'Remove leftover containers (labelled, with no session) and env files with no session'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from outbox" -f -a "pack" -d 'Pack a sealed session\'s outbox into a .tar.gz: regular files only, links never followed, with a README-UNTRUSTED.txt listing what was left out'
