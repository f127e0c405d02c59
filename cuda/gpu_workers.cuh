// One worker per GPU, for the workloads that copy on every GPU at once
// (multigpu, node): the workers are threads of this process, or with
// --procs processes of their own (this program again, exec'd by the parent
// with --child k --up --down --spans), as torchrun or mpirun start a rank
// per GPU. Every timed repetition starts on all workers together: a pthread
// barrier, or with --procs a pipe through the parent (one byte up from each
// child, one byte down to each once all are in). Each worker times its
// repetitions as spans; a child writes its spans to a file the parent
// opened for it, one "phase rep t0 t1" line each.
#pragma once

#include "common.cuh"

#include <cerrno>
#include <functional>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

struct Span {
    double t0 = 0, t1 = 0;
};
// one worker's spans[phase][rep]
using WorkerSpans = std::vector<std::vector<Span>>;
// spans[worker][phase][rep]
using Spans = std::vector<WorkerSpans>;

class Barrier {
public:
    virtual ~Barrier() = default;
    virtual void wait() = 0;
};

class ThreadBarrier : public Barrier {
public:
    explicit ThreadBarrier(int n) { pthread_barrier_init(&b_, nullptr, n); }
    ~ThreadBarrier() override { pthread_barrier_destroy(&b_); }
    void wait() override { pthread_barrier_wait(&b_); }

private:
    pthread_barrier_t b_;
};

static inline void workers_write_byte(const char* name, int fd) {
    char c = 1;
    while (write(fd, &c, 1) != 1)
        if (errno != EINTR) { fprintf(stderr, "%s: barrier write: %s\n", name, strerror(errno)); exit(1); }
}

// A child's side of the parent's pipe barrier: one byte up, wait for one down.
class PipeBarrier : public Barrier {
public:
    PipeBarrier(const char* name, int up, int down) : name_(name), up_(up), down_(down) {}
    void wait() override {
        workers_write_byte(name_, up_);
        char c;
        ssize_t r;
        while ((r = read(down_, &c, 1)) < 0 && errno == EINTR) {}
        if (r != 1) { fprintf(stderr, "%s: parent went away\n", name_); exit(1); }
    }

private:
    const char* name_;
    int up_, down_;
};

// ------------------------------------------------------------- results ---

static inline Stats per_copy(const std::vector<Span>& v, int copies) {
    std::vector<double> t;
    for (const Span& s : v) t.push_back((s.t1 - s.t0) / copies);
    return stats_of(t);
}

// From the first worker's start to the last one's end, per repetition.
static inline Stats aggregate(const Spans& s, size_t phase, int copies) {
    std::vector<Span> agg(s[0][phase].size());
    for (size_t r = 0; r < agg.size(); r++) {
        agg[r] = s[0][phase][r];
        for (const auto& w : s) {
            agg[r].t0 = std::min(agg[r].t0, w[phase][r].t0);
            agg[r].t1 = std::max(agg[r].t1, w[phase][r].t1);
        }
    }
    return per_copy(agg, copies);
}

// --------------------------------------------------------------- threads ---

// A thread per GPU, each work(k, barrier, its spans); returns every
// worker's spans.
static inline Spans workers_threads(int gpus, const std::function<void(int, Barrier&, WorkerSpans&)>& work) {
    ThreadBarrier b(gpus);
    Spans s(gpus);
    std::vector<std::thread> th;
    for (int k = 0; k < gpus; k++)
        th.emplace_back([&, k] { work(k, b, s[k]); });
    for (auto& t : th) t.join();
    return s;
}

// ------------------------------------------------------------- processes ---

// A child of --procs: its work with the parent's pipe barrier, then its
// spans to the parent's file. Returns the child's exit status.
static inline int workers_child(const char* name, int up, int down, int spans_fd,
                                const std::function<void(Barrier&, WorkerSpans&)>& work) {
    PipeBarrier b(name, up, down);
    WorkerSpans spans;
    work(b, spans);
    close(up);
    close(down);
    FILE* f = fdopen(spans_fd, "w");
    if (!f) { fprintf(stderr, "%s: spans: %s\n", name, strerror(errno)); return 1; }
    for (size_t i = 0; i < spans.size(); i++)
        for (size_t r = 0; r < spans[i].size(); r++)
            fprintf(f, "%zu %zu %.9f %.9f\n", i, r, spans[i][r].t0, spans[i][r].t1);
    return fclose(f) ? 1 : 0;
}

static inline void workers_read_spans(const char* name, FILE* f, int k, WorkerSpans& spans) {
    rewind(f);
    size_t i, r, n = 0, want = spans.size() * spans[0].size();
    double t0, t1;
    while (fscanf(f, "%zu %zu %lf %lf", &i, &r, &t0, &t1) == 4 && i < spans.size() && r < spans[i].size()) {
        spans[i][r] = {t0, t1};
        n++;
    }
    fclose(f);
    if (n != want) {
        fprintf(stderr, "%s: gpu%d's process left %zu spans, expected %zu\n", name, k, n, want);
        exit(1);
    }
}

// Kills the children still running and exits with the status of the one that
// failed (2 for a mismatch, so that it is told apart from an API error).
[[noreturn]] static inline void workers_give_up(const std::vector<pid_t>& pids, int status) {
    for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
    for (pid_t p : pids)
        if (p > 0) waitpid(p, nullptr, 0);
    exit(WIFEXITED(status) && WEXITSTATUS(status) ? WEXITSTATUS(status) : 1);
}

// Reaps child k if it ended (block: wait for it); gives up if it failed.
static inline void workers_reap(const char* name, std::vector<pid_t>& pids, int k, bool block) {
    int st;
    if (pids[k] <= 0 || waitpid(pids[k], &st, block ? 0 : WNOHANG) != pids[k]) return;
    pids[k] = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "%s: gpu%d's process failed (status 0x%x)\n", name, k, st);
        workers_give_up(pids, st);
    }
}

// The command line of child k, given the file descriptors of its pipe
// barrier (up, down) and of its spans' file: this program again, argv[0]
// first, the workload's configuration spelled out.
using ChildArgs = std::function<std::vector<std::string>(int k, int up, int down, int spans)>;

// The parent of --procs: starts one process per GPU, releases each barrier
// once every child is in it, then gathers the spans of `phases` phases of
// `reps` repetitions each. A failed child ends the parent (workers_give_up).
static inline Spans workers_procs(const char* name, int gpus, size_t phases, int reps,
                                  const ChildArgs& child_args) {
    signal(SIGPIPE, SIG_IGN);  // a dead child's pipe: an error, seen by workers_write_byte
    std::vector<pid_t> pids(gpus, 0);
    int up[2];
    if (pipe(up)) { perror("pipe"); workers_give_up(pids, 0); }
    std::vector<int> down(gpus);
    std::vector<FILE*> spans(gpus);
    fflush(nullptr);
    for (int k = 0; k < gpus; k++) {
        int d[2];
        if (pipe(d) || !(spans[k] = tmpfile())) {
            fprintf(stderr, "%s: pipe, tmpfile: %s\n", name, strerror(errno));
            workers_give_up(pids, 0);
        }
        // built before fork: the child of a threaded process must not allocate
        std::vector<std::string> args = child_args(k, up[1], d[0], fileno(spans[k]));
        std::vector<char*> av;
        for (std::string& x : args) av.push_back(&x[0]);
        av.push_back(nullptr);
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); workers_give_up(pids, 0); }
        if (pid == 0) {
            close(up[0]);
            close(d[1]);
            for (int j = 0; j < k; j++) {  // the other children's ends
                close(down[j]);
                close(fileno(spans[j]));
            }
            for (int fd : {up[1], d[0], fileno(spans[k])}) fcntl(fd, F_SETFD, 0);
            execv("/proc/self/exe", av.data());
            fprintf(stderr, "%s: execv: %s\n", name, strerror(errno));
            _exit(127);
        }
        close(d[0]);
        down[k] = d[1];
        pids[k] = pid;
    }
    close(up[1]);
    // The pipe ends (read returns 0) once every child closed its end.
    for (int arrived = 0;;) {
        struct pollfd pf = {up[0], POLLIN, 0};
        int n = poll(&pf, 1, 1000);
        if (n < 0 && errno != EINTR) { perror("poll"); workers_give_up(pids, 0); }
        if (n <= 0) {  // quiet for a second: has a child died?
            for (int k = 0; k < gpus; k++) workers_reap(name, pids, k, false);
            continue;
        }
        char buf[64];
        ssize_t got = read(up[0], buf, sizeof buf);
        if (got == 0) break;
        if (got > 0) arrived += (int)got;
        for (; arrived >= gpus; arrived -= gpus)
            for (int fd : down) workers_write_byte(name, fd);
    }
    for (int fd : down) close(fd);
    for (int k = 0; k < gpus; k++) workers_reap(name, pids, k, true);
    Spans s(gpus, WorkerSpans(phases, std::vector<Span>(reps)));
    for (int k = 0; k < gpus; k++) workers_read_spans(name, spans[k], k, s[k]);
    return s;
}
