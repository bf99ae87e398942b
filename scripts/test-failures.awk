# The failures of a `cargo test` log, short: each failing test's name, the
# command and exit it reports, and the last lines of its message (the
# command's stderr), so that the end of a long log says why.
function flush(   i, from) {
    if (name == "") return
    print "---- " name
    if (cmd != "") print cmd
    if (ex != "") print ex
    from = n > keep ? n - keep + 1 : 1
    for (i = from; i <= n; i++) print msg[i]
    name = ""; cmd = ""; ex = ""; n = 0
}
/^---- .* stdout ----$/ { flush(); name = $2; inmsg = 0; next }
name != "" && /panicked at/ { inmsg = 1; next }
inmsg && (/^stack backtrace:/ || /^note: run with/ || /^failures:$/) { inmsg = 0; next }
inmsg && /^assertion `left == right` failed: command: / { sub(/^assertion `left == right` failed: /, ""); cmd = $0; next }
inmsg && /^command: / && cmd == "" { cmd = $0; next }
inmsg && /^exit: / && ex == "" { ex = $0; next }
inmsg { msg[++n] = $0 }
END { flush() }
