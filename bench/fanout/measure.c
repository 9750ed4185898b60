// measure: runs one command and reports what the fan-out benchmark compares.
//
//   measure [--user NAME] [--server-pids FILE] [--server-reaper FILE] [--out FILE] [--err FILE]
//           -- COMMAND [ARG...]
//   measure --reaper FILE -- COMMAND [ARG...]
//
// It forks COMMAND (as NAME when given: setgid, initgroups, setuid, chdir to its home, all
// before exec, so nothing of the privilege switch is charged to the command), with stdin on
// /dev/null and stdout on a pipe that it reads itself, and prints one line of key=value pairs:
//
//   wall        seconds from fork until the command has exited and its stdout reached EOF
//   first_byte  seconds from fork until the first byte arrived on that pipe (-1: none)
//   user, sys   CPU seconds of the whole client process tree: getrusage(RUSAGE_CHILDREN) after
//               everything was reaped. The command's own waits fold its children (ssh
//               processes, shells) into its usage, and measure makes itself a child subreaper
//               so orphans that outlive their parent are reaped, and counted, here as well.
//   maxrss_kb   the largest resident set of any single process of that tree
//   bytes lines what came out on stdout (the harness checks lines == number of hosts)
//   rc          the exit status (128+n for a signal)
//   server_cpu  CPU seconds of the server side: what the sshd listeners named in --server-pids
//               (one PID per line) collected from their reaped sessions (cutime+cstime in
//               /proc/PID/stat: sshd, the login shell and the remote command), plus what the
//               --server-reaper process reaped (below); read 100 ms after the run so the last
//               sessions are reaped
//   busy_cpu    CPU seconds the whole machine was busy during the run (/proc/stat, every
//               state but idle and iowait); busy_cpu - user - sys - server_cpu is what other
//               processes on the machine used meanwhile
//
// --reaper mode starts the sshd fleet: it makes itself a child subreaper and runs COMMAND (a
// script that starts the listeners in the background and waits for them). When a client hangs
// up, sshd's per-session monitor can exit before reaping its unprivileged child (seen with the
// OpenSSH client: the child turns up as a zombie of init), so that child's CPU, and the shell's,
// never reaches the listener's cutime. Under the reaper such orphans come here instead; after
// every reap it rewrites FILE with "USER_TICKS SYS_TICKS" of everything it reaped so far.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double tv_s(struct timeval tv) {
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

// Busy ticks of the whole machine: every /proc/stat "cpu" field but idle (4th) and iowait (5th).
static long long busy_ticks(void) {
  FILE* f = fopen("/proc/stat", "r");
  if (f == NULL) {
    return 0;
  }
  long long v[10] = {0};
  int n = fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2],
                 &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
  fclose(f);
  long long busy = 0;
  for (int i = 0; i < n && i < 8; ++i) { // guest time (8, 9) is already inside user
    if (i != 3 && i != 4) {
      busy += v[i];
    }
  }
  return busy;
}

// Sum of cutime+cstime (fields 16 and 17 of /proc/PID/stat) over the PIDs listed in `path`.
static long long server_ticks(const char* path) {
  if (path == NULL) {
    return 0;
  }
  FILE* list = fopen(path, "r");
  if (list == NULL) {
    return 0;
  }
  long long total = 0;
  long pid;
  while (fscanf(list, "%ld", &pid) == 1) {
    char name[64], buf[1024];
    snprintf(name, sizeof name, "/proc/%ld/stat", pid);
    int fd = open(name, O_RDONLY);
    if (fd < 0) {
      continue;
    }
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0) {
      continue;
    }
    buf[len] = '\0';
    char* p = strrchr(buf, ')'); // the command name may contain spaces; fields follow it
    if (p == NULL) {
      continue;
    }
    long long field[20] = {0};
    int got =
        sscanf(p + 2, "%*c %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld",
               &field[4], &field[5], &field[6], &field[7], &field[8], &field[9], &field[10],
               &field[11], &field[12], &field[13], &field[14], &field[15], &field[16], &field[17]);
    if (got == 14) {
      total += field[16] + field[17];
    }
  }
  fclose(list);
  return total;
}

// User+sys ticks recorded by a --reaper process in `path`.
static long long reaper_ticks(const char* path) {
  long long u = 0, s = 0;
  FILE* f = path != NULL ? fopen(path, "r") : NULL;
  if (f != NULL) {
    if (fscanf(f, "%lld %lld", &u, &s) != 2) {
      u = s = 0;
    }
    fclose(f);
  }
  return u + s;
}

static int run_reaper(const char* path, char** argv) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 2;
  }
  if (pid == 0) {
    execvp(argv[0], argv);
    perror(argv[0]);
    _exit(127);
  }
  double hz = (double)sysconf(_SC_CLK_TCK);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int status = 0;
  for (;;) {
    int st;
    pid_t got = wait(&st);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      break; // ECHILD: everything is gone
    }
    if (got == pid) {
      status = st;
    }
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    FILE* f = fopen(tmp, "w");
    if (f != NULL) {
      fprintf(f, "%lld %lld\n", (long long)(tv_s(ru.ru_utime) * hz + 0.5),
              (long long)(tv_s(ru.ru_stime) * hz + 0.5));
      fclose(f);
      rename(tmp, path);
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static void usage(void) {
  fprintf(stderr, "usage: measure [--user NAME] [--server-pids FILE] [--server-reaper FILE] "
                  "[--out FILE] [--err FILE] -- COMMAND [ARG...]\n"
                  "       measure --reaper FILE -- COMMAND [ARG...]\n");
  exit(2);
}

int main(int argc, char** argv) {
  const char* user = NULL;
  const char* pids_file = NULL;
  const char* reaper_file = NULL;
  const char* reaper_mode = NULL;
  const char* out_file = NULL;
  const char* err_file = "/dev/null";
  int i = 1;
  for (; i < argc; ++i) {
    if (strcmp(argv[i], "--") == 0) {
      ++i;
      break;
    }
    if (i + 1 >= argc) {
      usage();
    }
    if (strcmp(argv[i], "--user") == 0) {
      user = argv[++i];
    } else if (strcmp(argv[i], "--server-pids") == 0) {
      pids_file = argv[++i];
    } else if (strcmp(argv[i], "--server-reaper") == 0) {
      reaper_file = argv[++i];
    } else if (strcmp(argv[i], "--reaper") == 0) {
      reaper_mode = argv[++i];
    } else if (strcmp(argv[i], "--out") == 0) {
      out_file = argv[++i];
    } else if (strcmp(argv[i], "--err") == 0) {
      err_file = argv[++i];
    } else {
      usage();
    }
  }
  if (i >= argc) {
    usage();
  }
  if (reaper_mode != NULL) {
    return run_reaper(reaper_mode, argv + i);
  }
  struct passwd* pw = NULL;
  if (user != NULL && (pw = getpwnam(user)) == NULL) {
    fprintf(stderr, "measure: no user '%s'\n", user);
    return 2;
  }
  int out_fd = -1;
  if (out_file != NULL && (out_fd = open(out_file, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
    perror(out_file);
    return 2;
  }
  int err_fd = open(err_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int null_fd = open("/dev/null", O_RDONLY);
  int pipe_fd[2];
  if (err_fd < 0 || null_fd < 0 || pipe2(pipe_fd, O_CLOEXEC) != 0) {
    perror("measure");
    return 2;
  }
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  long long server_before = server_ticks(pids_file) + reaper_ticks(reaper_file);
  long long busy_before = busy_ticks();
  double t0 = now_s();
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 2;
  }
  if (pid == 0) {
    dup2(null_fd, 0);
    dup2(pipe_fd[1], 1);
    dup2(err_fd, 2);
    if (pw != NULL) {
      if (setgid(pw->pw_gid) != 0 || initgroups(pw->pw_name, pw->pw_gid) != 0 ||
          setuid(pw->pw_uid) != 0 || chdir(pw->pw_dir) != 0) {
        perror("measure: switching user");
        _exit(126);
      }
    }
    execvp(argv[i], argv + i);
    perror(argv[i]);
    _exit(127);
  }
  close(pipe_fd[1]);

  double first = -1;
  long long bytes = 0, lines = 0;
  char buf[65536];
  for (;;) {
    ssize_t n = read(pipe_fd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    if (first < 0) {
      first = now_s() - t0;
    }
    bytes += n;
    for (ssize_t k = 0; k < n; ++k) {
      lines += buf[k] == '\n';
    }
    if (out_fd >= 0 && write(out_fd, buf, (size_t)n) != n) {
      perror(out_file);
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Orphans of the tree were reparented to us: reap them so their CPU is counted too.
  while (wait(NULL) > 0 || errno == EINTR) {
  }
  double wall = now_s() - t0;
  long long busy_after = busy_ticks();
  struct rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  usleep(100000);
  long long server_after = server_ticks(pids_file) + reaper_ticks(reaper_file);

  double hz = (double)sysconf(_SC_CLK_TCK);
  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  printf("wall=%.4f first_byte=%.4f user=%.4f sys=%.4f maxrss_kb=%ld bytes=%lld lines=%lld "
         "rc=%d server_cpu=%.2f busy_cpu=%.2f\n",
         wall, first, tv_s(ru.ru_utime), tv_s(ru.ru_stime), ru.ru_maxrss, bytes, lines, rc,
         (double)(server_after - server_before) / hz, (double)(busy_after - busy_before) / hz);
  return 0;
}
