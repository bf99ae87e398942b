_shrooms__agent() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="shrooms__agent"
                ;;
            shrooms__agent,cage)
                cmd="shrooms__agent__subcmd__cage"
                ;;
            shrooms__agent,completions)
                cmd="shrooms__agent__subcmd__completions"
                ;;
            shrooms__agent,doctor)
                cmd="shrooms__agent__subcmd__doctor"
                ;;
            shrooms__agent,files)
                cmd="shrooms__agent__subcmd__files"
                ;;
            shrooms__agent,help)
                cmd="shrooms__agent__subcmd__help"
                ;;
            shrooms__agent,image)
                cmd="shrooms__agent__subcmd__image"
                ;;
            shrooms__agent,man)
                cmd="shrooms__agent__subcmd__man"
                ;;
            shrooms__agent,mcp)
                cmd="shrooms__agent__subcmd__mcp"
                ;;
            shrooms__agent,outbox)
                cmd="shrooms__agent__subcmd__outbox"
                ;;
            shrooms__agent,serve)
                cmd="shrooms__agent__subcmd__serve"
                ;;
            shrooms__agent__subcmd__cage,accept-caged)
                cmd="shrooms__agent__subcmd__cage__subcmd__accept__subcmd__caged"
                ;;
            shrooms__agent__subcmd__cage,create)
                cmd="shrooms__agent__subcmd__cage__subcmd__create"
                ;;
            shrooms__agent__subcmd__cage,exec)
                cmd="shrooms__agent__subcmd__cage__subcmd__exec"
                ;;
            shrooms__agent__subcmd__cage,help)
                cmd="shrooms__agent__subcmd__cage__subcmd__help"
                ;;
            shrooms__agent__subcmd__cage,history)
                cmd="shrooms__agent__subcmd__cage__subcmd__history"
                ;;
            shrooms__agent__subcmd__cage,limits)
                cmd="shrooms__agent__subcmd__cage__subcmd__limits"
                ;;
            shrooms__agent__subcmd__cage,ls)
                cmd="shrooms__agent__subcmd__cage__subcmd__ls"
                ;;
            shrooms__agent__subcmd__cage,move)
                cmd="shrooms__agent__subcmd__cage__subcmd__move"
                ;;
            shrooms__agent__subcmd__cage,prune)
                cmd="shrooms__agent__subcmd__cage__subcmd__prune"
                ;;
            shrooms__agent__subcmd__cage,rm)
                cmd="shrooms__agent__subcmd__cage__subcmd__rm"
                ;;
            shrooms__agent__subcmd__cage,run)
                cmd="shrooms__agent__subcmd__cage__subcmd__run"
                ;;
            shrooms__agent__subcmd__cage,show)
                cmd="shrooms__agent__subcmd__cage__subcmd__show"
                ;;
            shrooms__agent__subcmd__cage,start)
                cmd="shrooms__agent__subcmd__cage__subcmd__start"
                ;;
            shrooms__agent__subcmd__cage,stop)
                cmd="shrooms__agent__subcmd__cage__subcmd__stop"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,accept-caged)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__accept__subcmd__caged"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,create)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__create"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,exec)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__exec"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,help)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__help"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,history)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__history"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,limits)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__limits"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,ls)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__ls"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,move)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__move"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,prune)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__prune"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,rm)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__rm"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,run)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__run"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,show)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__show"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,start)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__start"
                ;;
            shrooms__agent__subcmd__cage__subcmd__help,stop)
                cmd="shrooms__agent__subcmd__cage__subcmd__help__subcmd__stop"
                ;;
            shrooms__agent__subcmd__files,allow)
                cmd="shrooms__agent__subcmd__files__subcmd__allow"
                ;;
            shrooms__agent__subcmd__files,deny)
                cmd="shrooms__agent__subcmd__files__subcmd__deny"
                ;;
            shrooms__agent__subcmd__files,help)
                cmd="shrooms__agent__subcmd__files__subcmd__help"
                ;;
            shrooms__agent__subcmd__files,list)
                cmd="shrooms__agent__subcmd__files__subcmd__list"
                ;;
            shrooms__agent__subcmd__files__subcmd__help,allow)
                cmd="shrooms__agent__subcmd__files__subcmd__help__subcmd__allow"
                ;;
            shrooms__agent__subcmd__files__subcmd__help,deny)
                cmd="shrooms__agent__subcmd__files__subcmd__help__subcmd__deny"
                ;;
            shrooms__agent__subcmd__files__subcmd__help,help)
                cmd="shrooms__agent__subcmd__files__subcmd__help__subcmd__help"
                ;;
            shrooms__agent__subcmd__files__subcmd__help,list)
                cmd="shrooms__agent__subcmd__files__subcmd__help__subcmd__list"
                ;;
            shrooms__agent__subcmd__help,cage)
                cmd="shrooms__agent__subcmd__help__subcmd__cage"
                ;;
            shrooms__agent__subcmd__help,completions)
                cmd="shrooms__agent__subcmd__help__subcmd__completions"
                ;;
            shrooms__agent__subcmd__help,doctor)
                cmd="shrooms__agent__subcmd__help__subcmd__doctor"
                ;;
            shrooms__agent__subcmd__help,files)
                cmd="shrooms__agent__subcmd__help__subcmd__files"
                ;;
            shrooms__agent__subcmd__help,help)
                cmd="shrooms__agent__subcmd__help__subcmd__help"
                ;;
            shrooms__agent__subcmd__help,image)
                cmd="shrooms__agent__subcmd__help__subcmd__image"
                ;;
            shrooms__agent__subcmd__help,man)
                cmd="shrooms__agent__subcmd__help__subcmd__man"
                ;;
            shrooms__agent__subcmd__help,mcp)
                cmd="shrooms__agent__subcmd__help__subcmd__mcp"
                ;;
            shrooms__agent__subcmd__help,outbox)
                cmd="shrooms__agent__subcmd__help__subcmd__outbox"
                ;;
            shrooms__agent__subcmd__help,serve)
                cmd="shrooms__agent__subcmd__help__subcmd__serve"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,accept-caged)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__accept__subcmd__caged"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,create)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__create"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,exec)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__exec"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,history)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__history"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,limits)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__limits"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,ls)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__ls"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,move)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__move"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,prune)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__prune"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,rm)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__rm"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,run)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__run"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,show)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__show"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,start)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__start"
                ;;
            shrooms__agent__subcmd__help__subcmd__cage,stop)
                cmd="shrooms__agent__subcmd__help__subcmd__cage__subcmd__stop"
                ;;
            shrooms__agent__subcmd__help__subcmd__files,allow)
                cmd="shrooms__agent__subcmd__help__subcmd__files__subcmd__allow"
                ;;
            shrooms__agent__subcmd__help__subcmd__files,deny)
                cmd="shrooms__agent__subcmd__help__subcmd__files__subcmd__deny"
                ;;
            shrooms__agent__subcmd__help__subcmd__files,list)
                cmd="shrooms__agent__subcmd__help__subcmd__files__subcmd__list"
                ;;
            shrooms__agent__subcmd__help__subcmd__image,build)
                cmd="shrooms__agent__subcmd__help__subcmd__image__subcmd__build"
                ;;
            shrooms__agent__subcmd__help__subcmd__image,status)
                cmd="shrooms__agent__subcmd__help__subcmd__image__subcmd__status"
                ;;
            shrooms__agent__subcmd__help__subcmd__outbox,pack)
                cmd="shrooms__agent__subcmd__help__subcmd__outbox__subcmd__pack"
                ;;
            shrooms__agent__subcmd__help__subcmd__outbox,send)
                cmd="shrooms__agent__subcmd__help__subcmd__outbox__subcmd__send"
                ;;
            shrooms__agent__subcmd__image,build)
                cmd="shrooms__agent__subcmd__image__subcmd__build"
                ;;
            shrooms__agent__subcmd__image,help)
                cmd="shrooms__agent__subcmd__image__subcmd__help"
                ;;
            shrooms__agent__subcmd__image,status)
                cmd="shrooms__agent__subcmd__image__subcmd__status"
                ;;
            shrooms__agent__subcmd__image__subcmd__help,build)
                cmd="shrooms__agent__subcmd__image__subcmd__help__subcmd__build"
                ;;
            shrooms__agent__subcmd__image__subcmd__help,help)
                cmd="shrooms__agent__subcmd__image__subcmd__help__subcmd__help"
                ;;
            shrooms__agent__subcmd__image__subcmd__help,status)
                cmd="shrooms__agent__subcmd__image__subcmd__help__subcmd__status"
                ;;
            shrooms__agent__subcmd__outbox,help)
                cmd="shrooms__agent__subcmd__outbox__subcmd__help"
                ;;
            shrooms__agent__subcmd__outbox,pack)
                cmd="shrooms__agent__subcmd__outbox__subcmd__pack"
                ;;
            shrooms__agent__subcmd__outbox,send)
                cmd="shrooms__agent__subcmd__outbox__subcmd__send"
                ;;
            shrooms__agent__subcmd__outbox__subcmd__help,help)
                cmd="shrooms__agent__subcmd__outbox__subcmd__help__subcmd__help"
                ;;
            shrooms__agent__subcmd__outbox__subcmd__help,pack)
                cmd="shrooms__agent__subcmd__outbox__subcmd__help__subcmd__pack"
                ;;
            shrooms__agent__subcmd__outbox__subcmd__help,send)
                cmd="shrooms__agent__subcmd__outbox__subcmd__help__subcmd__send"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        shrooms__agent)
            opts="-h -V --json --help --version cage doctor image outbox files serve completions man mcp help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage)
            opts="-h --json --help create start stop rm move limits history accept-caged exec run ls show prune help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__accept__subcmd__caged)
            opts="-h --json --help on off"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__create)
            opts="-h --dir --harness --dry-run --unseal --image --github --nix --shared --mesh --sealed --sealed-token --conversation --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --harness)
                    COMPREPLY=($(compgen -W "claude pi" -- "${cur}"))
                    return 0
                    ;;
                --image)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mesh)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sealed-token)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --conversation)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__exec)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help)
            opts="create start stop rm move limits history accept-caged exec run ls show prune help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__accept__subcmd__caged)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__create)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__exec)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__history)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__limits)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__ls)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__move)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__prune)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__rm)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__show)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__start)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__help__subcmd__stop)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__history)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__limits)
            opts="-h --memory --cpus --pids --tokens --reset --by --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --memory)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cpus)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pids)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --by)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__ls)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__move)
            opts="-h --out --by --unseal --image --github --nix --shared --mesh --sealed --sealed-token --conversation --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --by)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --image)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mesh)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sealed-token)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --conversation)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__prune)
            opts="-y -h --dry-run --yes --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__rm)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__run)
            opts="-h --uncaged --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__show)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__start)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__cage__subcmd__stop)
            opts="-h --all --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__completions)
            opts="-h --json --help bash elvish fish powershell zsh"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__doctor)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__files)
            opts="-h --json --help allow deny list help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__files__subcmd__allow)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__files__subcmd__deny)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__files__subcmd__help)
            opts="allow deny list help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__files__subcmd__help__subcmd__allow)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__files__subcmd__help__subcmd__deny)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__files__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__files__subcmd__help__subcmd__list)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__files__subcmd__list)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help)
            opts="cage doctor image outbox files serve completions man mcp help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage)
            opts="create start stop rm move limits history accept-caged exec run ls show prune"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__accept__subcmd__caged)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__create)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__exec)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__history)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__limits)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__ls)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__move)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__prune)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__rm)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__show)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__start)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__cage__subcmd__stop)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__completions)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__doctor)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__files)
            opts="allow deny list"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__files__subcmd__allow)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__files__subcmd__deny)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__files__subcmd__list)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__image)
            opts="build status"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__image__subcmd__build)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__image__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__man)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__mcp)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__outbox)
            opts="pack send"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__outbox__subcmd__pack)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__outbox__subcmd__send)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__help__subcmd__serve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__image)
            opts="-h --json --help build status help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__image__subcmd__build)
            opts="-h --wait --containerfile --json --help workbench desktop all"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --containerfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__image__subcmd__help)
            opts="build status help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__image__subcmd__help__subcmd__build)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__image__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__image__subcmd__help__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__image__subcmd__status)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__man)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__mcp)
            opts="-h --sealed --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__outbox)
            opts="-h --json --help pack send help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__outbox__subcmd__help)
            opts="pack send help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__outbox__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__outbox__subcmd__help__subcmd__pack)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__outbox__subcmd__help__subcmd__send)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__outbox__subcmd__pack)
            opts="-o -h --output --force --only --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --output)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --only)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__outbox__subcmd__send)
            opts="-h --only --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --only)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        shrooms__subcmd__agent__subcmd__serve)
            opts="-h --listen --token-file --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --token-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _shrooms__agent -o nosort -o bashdefault -o default shrooms-agent
else
    complete -F _shrooms__agent -o bashdefault -o default shrooms-agent
fi
