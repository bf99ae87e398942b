/* A small static probe the end-to-end tests compile (gcc -static) and run
 * inside a cage, to perform attacks with the system calls themselves
 * rather than through a tool that might do something else.
 *
 *   probe userns           clone(CLONE_NEWUSER), unshare(CLONE_NEWUSER)
 *                          and clone3(CLONE_NEWUSER), each in a child of
 *                          its own; one line per call: "NAME OK" or
 *                          "NAME <errno name>"
 *   probe tcp ADDR PORT    connect within 3 s: "tcp ADDR CONNECTED" or
 *                          "tcp ADDR <errno name> <milliseconds>"
 *   probe udp ADDR PORT    send one datagram: "udp ADDR SENT" or
 *                          "udp ADDR <errno name>"; to a multicast ADDR
 *                          with a time to live of 0 (see udp())
 *   probe flood ADDR PORT N USEC
 *                          send N datagrams, USEC microseconds apart:
 *                          "flood SENT n FAILED n" (a refused send fails)
 *   probe blind ADDR PORT SECONDS FILE...
 *                          connect, send one FILE (each in turn) whole,
 *                          close at once without reading, again and again
 *                          for SECONDS: a client that never reads its
 *                          answer. "blind TRIES n SENT n"
 *   probe hold ADDR PORT N SECONDS
 *                          open N connections, send each half a request
 *                          head, keep them SECONDS, then close them:
 *                          "hold OPEN n" once they are open
 *
 *   probe keyring DESC     the host root's user keyring, from a cage: one
 *                          line per call, "keyctl <id or errno name>"
 *                          (KEYCTL_SEARCH of @u for the user key DESC),
 *                          "link <0 or errno name>" (@u linked into the
 *                          session keyring), "read <payload or errno
 *                          name>" when it was found,
 *                          "request_key <id or errno name>" and
 *                          "add_key <id or errno name>"
 *   probe keyadd DESC DATA add the user key DESC to @u (the test's own
 *                          keyring, on the host): prints its id
 *   probe keyrm ID         invalidate that key
 *   probe ids              "ruid=N euid=N": who runs it (a set-user-ID
 *                          copy shows its owner as euid)
 *   probe trace PID        ptrace(PTRACE_ATTACH) of PID, then a
 *                          process_vm_writev of a byte of it: "ptrace
 *                          ATTACHED" or "ptrace <errno name>", and
 *                          "vm_writev WRITTEN" or "vm_writev <errno name>"
 *
 * ADDR is numeric IPv4 or IPv6; an IPv6 link-local address takes its
 * interface after a '%' (fe80::1%eth0). The exit status is 0 whenever the
 * probe could say what happened: the verdict is in the output.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_clone3
#define SYS_clone3 435
#endif

static const char *errname(int e) {
    switch (e) {
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case ENOSYS: return "ENOSYS";
    case EINVAL: return "EINVAL";
    case ENOSPC: return "ENOSPC";
    case EUSERS: return "EUSERS";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNRESET: return "ECONNRESET";
    case ENETUNREACH: return "ENETUNREACH";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case ENOKEY: return "ENOKEY";
    case EKEYREVOKED: return "EKEYREVOKED";
    case EDQUOT: return "EDQUOT";
    default: return "OTHER";
    }
}

/* Run fn in a child; the child reports through its exit status:
 * 0 = the call succeeded, else the errno (kept below 256). */
static void in_child(const char *name, int (*fn)(void)) {
    pid_t p = fork();
    if (p < 0) {
        printf("%s fork-failed\n", name);
        return;
    }
    if (p == 0) {
        _exit(fn());
    }
    int status = 0;
    waitpid(p, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        printf("%s OK\n", name);
    } else if (WIFEXITED(status)) {
        int e = WEXITSTATUS(status);
        printf("%s %s (errno %d)\n", name, errname(e), e);
    } else {
        printf("%s killed-by-signal-%d\n", name, WTERMSIG(status));
    }
    fflush(stdout);
}

/* The raw system call, so no libc wrapper chooses clone3 or anything else
 * instead: x86_64 argument order (flags, stack, parent_tid, child_tid, tls). */
static int do_clone(void) {
    long r = syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L, 0L);
    if (r < 0) return errno & 0xff;
    if (r == 0) _exit(0); /* the new process, in its own user namespace */
    int status = 0;
    waitpid((pid_t)r, &status, 0);
    return 0;
}

static int do_unshare(void) {
    return syscall(SYS_unshare, (long)CLONE_NEWUSER) == 0 ? 0 : (errno & 0xff);
}

struct clone_args_v0 {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static int do_clone3(void) {
    struct clone_args_v0 a;
    memset(&a, 0, sizeof a);
    a.flags = CLONE_NEWUSER;
    a.exit_signal = SIGCHLD;
    long r = syscall(SYS_clone3, &a, sizeof a);
    if (r < 0) return errno & 0xff;
    if (r == 0) _exit(0);
    int status = 0;
    waitpid((pid_t)r, &status, 0);
    return 0;
}

static int address(const char *text, int port, struct sockaddr_storage *ss, socklen_t *len) {
    char host[128];
    snprintf(host, sizeof host, "%s", text);
    char *scope = strchr(host, '%');
    if (scope) *scope++ = 0;
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        *len = sizeof *v4;
        return AF_INET;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        if (scope) v6->sin6_scope_id = if_nametoindex(scope);
        *len = sizeof *v6;
        return AF_INET6;
    }
    return -1;
}

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static int tcp(const char *addr, int port) {
    struct sockaddr_storage ss;
    socklen_t len;
    int family = address(addr, port, &ss, &len);
    if (family < 0) {
        printf("tcp %s BAD-ADDRESS\n", addr);
        return 2;
    }
    int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (s < 0) {
        printf("tcp %s socket-%s\n", addr, errname(errno));
        return 0;
    }
    long start = now_ms();
    int r = connect(s, (struct sockaddr *)&ss, len);
    int e = r == 0 ? 0 : errno;
    if (r < 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = s, .events = POLLOUT};
        int n = poll(&p, 1, 3000);
        if (n == 0) {
            e = ETIMEDOUT;
        } else {
            socklen_t el = sizeof e;
            getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el);
        }
    }
    if (e == 0) {
        printf("tcp %s CONNECTED\n", addr);
    } else {
        printf("tcp %s %s %ld\n", addr, errname(e), now_ms() - start);
    }
    close(s);
    return 0;
}

static int udp(const char *addr, int port) {
    struct sockaddr_storage ss;
    socklen_t len;
    int family = address(addr, port, &ss, &len);
    if (family < 0) {
        printf("udp %s BAD-ADDRESS\n", addr);
        return 2;
    }
    int s = socket(family, SOCK_DGRAM, 0);
    if (s < 0) {
        printf("udp %s socket-%s\n", addr, errname(errno));
        return 0;
    }
    /* A multicast datagram goes with a time to live of 0: the kernel drops
     * it after the output hook (where a cage's rules are) and before the
     * interface, so it never leaves the cage. */
    int zero = 0;
    if (family == AF_INET && IN_MULTICAST(ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr))) {
        if (setsockopt(s, IPPROTO_IP, IP_MULTICAST_TTL, &zero, sizeof zero) != 0) {
            printf("udp %s ttl-%s\n", addr, errname(errno));
            return 0;
        }
    }
    if (family == AF_INET6 && IN6_IS_ADDR_MULTICAST(&((struct sockaddr_in6 *)&ss)->sin6_addr)) {
        if (setsockopt(s, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &zero, sizeof zero) != 0) {
            printf("udp %s hops-%s\n", addr, errname(errno));
            return 0;
        }
    }
    ssize_t r = sendto(s, "probe", 5, 0, (struct sockaddr *)&ss, len);
    if (r == 5) {
        printf("udp %s SENT\n", addr);
    } else {
        printf("udp %s %s\n", addr, errname(errno));
    }
    close(s);
    return 0;
}

static int flood(const char *addr, int port, long n, long usec) {
    struct sockaddr_storage ss;
    socklen_t len;
    int family = address(addr, port, &ss, &len);
    if (family < 0) {
        printf("flood %s BAD-ADDRESS\n", addr);
        return 2;
    }
    int s = socket(family, SOCK_DGRAM, 0);
    if (s < 0) {
        printf("flood %s socket-%s\n", addr, errname(errno));
        return 0;
    }
    long sent = 0, failed = 0;
    struct timespec gap = {.tv_sec = usec / 1000000, .tv_nsec = (usec % 1000000) * 1000};
    for (long i = 0; i < n; i++) {
        if (sendto(s, "flood", 5, 0, (struct sockaddr *)&ss, len) == 5) sent++;
        else failed++;
        if (usec > 0) nanosleep(&gap, NULL);
    }
    printf("flood SENT %ld FAILED %ld\n", sent, failed);
    close(s);
    return 0;
}

/* Seconds on the monotonic clock. */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int blind(const char *addr, int port, int seconds, int nfiles, char **files) {
    struct sockaddr_storage ss;
    socklen_t len;
    int family = address(addr, port, &ss, &len);
    if (family < 0) {
        printf("blind %s BAD-ADDRESS\n", addr);
        return 2;
    }
    static char bodies[16][4096];
    size_t sizes[16];
    if (nfiles > 16) nfiles = 16;
    for (int i = 0; i < nfiles; i++) {
        int fd = open(files[i], O_RDONLY);
        if (fd < 0) {
            printf("blind cannot-open %s\n", files[i]);
            return 2;
        }
        ssize_t n = read(fd, bodies[i], sizeof bodies[i]);
        close(fd);
        sizes[i] = n > 0 ? (size_t)n : 0;
    }
    long tries = 0, sent = 0;
    double end = now() + seconds;
    while (now() < end) {
        int s = socket(family, SOCK_STREAM, 0);
        if (s < 0) continue;
        tries++;
        if (connect(s, (struct sockaddr *)&ss, len) == 0) {
            int i = (int)(tries % nfiles);
            if (write(s, bodies[i], sizes[i]) == (ssize_t)sizes[i]) sent++;
        }
        close(s);
    }
    printf("blind TRIES %ld SENT %ld\n", tries, sent);
    return 0;
}

static int hold(const char *addr, int port, int n, int seconds) {
    struct sockaddr_storage ss;
    socklen_t len;
    int family = address(addr, port, &ss, &len);
    if (family < 0) {
        printf("hold %s BAD-ADDRESS\n", addr);
        return 2;
    }
    /* As many descriptors as the hard limit allows (the soft one is often
     * 1024, fewer than a flood needs). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int open_ = 0;
    static const char half[] = "GET /v1/harnesses HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (int i = 0; i < n; i++) {
        int s = socket(family, SOCK_STREAM, 0);
        if (s < 0) break;
        if (connect(s, (struct sockaddr *)&ss, len) != 0) {
            close(s);
            continue;
        }
        if (write(s, half, sizeof half - 1) > 0) open_++;
    }
    printf("hold OPEN %d\n", open_);
    sleep(seconds);
    return 0;
}

/* keyctl(2), add_key(2), request_key(2): no libkeyutils in a static
 * build, so the system calls and their constants from linux/keyctl.h. */
#define KEY_SPEC_SESSION_KEYRING -3
#define KEY_SPEC_USER_KEYRING -4
#define KEYCTL_LINK 8
#define KEYCTL_SEARCH 10
#define KEYCTL_READ 11
#define KEYCTL_INVALIDATE 21

static void key_verdict(const char *what, long r) {
    if (r >= 0) printf("%s %ld\n", what, r);
    else printf("%s %s\n", what, errname(errno));
}

static int keyring(const char *desc) {
    long id = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "user", desc, 0);
    key_verdict("keyctl", id);
    /* Linked into the session keyring, the key is possessed, and
     * possession is what its default permissions let read. */
    key_verdict("link", syscall(SYS_keyctl, KEYCTL_LINK, KEY_SPEC_USER_KEYRING,
                                KEY_SPEC_SESSION_KEYRING));
    if (id >= 0) id = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, "user", desc, 0);
    if (id >= 0) {
        char buf[256];
        long n = syscall(SYS_keyctl, KEYCTL_READ, id, buf, sizeof buf - 1);
        if (n >= 0) {
            buf[n < (long)sizeof buf - 1 ? n : (long)sizeof buf - 1] = 0;
            printf("read %s\n", buf);
        } else {
            printf("read %s\n", errname(errno));
        }
    }
    key_verdict("request_key",
                syscall(SYS_request_key, "user", desc, NULL, KEY_SPEC_SESSION_KEYRING));
    key_verdict("add_key", syscall(SYS_add_key, "user", "shrooms-probe", "x", 1,
                                   KEY_SPEC_SESSION_KEYRING));
    return 0;
}

/* Trace process `pid`, and write a byte of its memory with
 * process_vm_writev (at the address of one of ours: what matters is
 * whether the kernel lets the write be tried): a line each, ATTACHED or
 * WRITTEN, else the error. */
static int trace(int pid) {
    if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) == 0) {
        printf("ptrace ATTACHED\n");
        waitpid(pid, NULL, __WALL);
        ptrace(PTRACE_DETACH, pid, NULL, NULL);
    } else {
        printf("ptrace %s\n", errname(errno));
    }
    char byte = 0;
    struct iovec local = {&byte, 1}, remote = {&byte, 1};
    if (syscall(SYS_process_vm_writev, pid, &local, 1, &remote, 1, 0) >= 0)
        printf("vm_writev WRITTEN\n");
    else
        printf("vm_writev %s\n", errname(errno));
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 2 && strcmp(argv[1], "userns") == 0) {
        in_child("clone", do_clone);
        in_child("unshare", do_unshare);
        in_child("clone3", do_clone3);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "tcp") == 0) return tcp(argv[2], atoi(argv[3]));
    if (argc == 4 && strcmp(argv[1], "udp") == 0) return udp(argv[2], atoi(argv[3]));
    if (argc == 6 && strcmp(argv[1], "flood") == 0)
        return flood(argv[2], atoi(argv[3]), atol(argv[4]), atol(argv[5]));
    if (argc >= 6 && strcmp(argv[1], "blind") == 0)
        return blind(argv[2], atoi(argv[3]), atoi(argv[4]), argc - 5, argv + 5);
    if (argc == 6 && strcmp(argv[1], "hold") == 0)
        return hold(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    if (argc == 3 && strcmp(argv[1], "keyring") == 0) return keyring(argv[2]);
    if (argc == 4 && strcmp(argv[1], "keyadd") == 0) {
        long id = syscall(SYS_add_key, "user", argv[2], argv[3], strlen(argv[3]),
                          KEY_SPEC_USER_KEYRING);
        if (id < 0) { perror("add_key"); return 1; }
        printf("%ld\n", id);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "keyrm") == 0)
        return syscall(SYS_keyctl, KEYCTL_INVALIDATE, atol(argv[2])) == 0 ? 0 : 1;
    if (argc == 3 && strcmp(argv[1], "trace") == 0) return trace(atoi(argv[2]));
    if (argc == 2 && strcmp(argv[1], "ids") == 0) {
        printf("ruid=%d euid=%d\n", (int)getuid(), (int)geteuid());
        return 0;
    }
    fprintf(stderr, "usage: probe userns | tcp ADDR PORT | udp ADDR PORT | flood ADDR PORT N USEC | "
                    "blind ADDR PORT SECONDS FILE... | hold ADDR PORT N SECONDS | keyring DESC"
                    " | keyadd DESC DATA | keyrm ID | ids | trace PID\n");
    return 2;
}
