/* Thread names (`comm`): what PR_SET_NAME sets and PR_GET_NAME reads, for
 * the thread that set it, a thread and a child process it then creates
 * (both inherit it), and, with `exec`, the program execve() starts (named
 * after the file the call names: /proc/self/exe gives "exe").
 *
 *   comm [names]  set, get, a thread, a fork
 *   comm exec     the same, then execve("/proc/self/exe") */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char *who) {
    char name[17] = {0};
    if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0) {
        perror("comm: PR_GET_NAME");
    }
    printf("%s: %s\n", who, name);
    fflush(stdout);
}

static void *thread(void *arg) {
    (void)arg;
    say("thread");
    prctl(PR_SET_NAME, "worker", 0, 0, 0);
    say("thread renamed");
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "after-exec") == 0) {
        say("after exec");
        return 0;
    }
    /* Longer than the 15 bytes a name holds: cut. */
    prctl(PR_SET_NAME, "a-name-longer-than-fifteen", 0, 0, 0);
    say("main");
    pthread_t t;
    if (pthread_create(&t, NULL, thread, NULL) != 0) {
        return 2;
    }
    pthread_join(t, NULL);
    say("main after the thread");
    pid_t pid = fork();
    if (pid == 0) {
        say("child");
        prctl(PR_SET_NAME, "child", 0, 0, 0);
        say("child renamed");
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    say("main after the child");
    if (argc > 1 && strcmp(argv[1], "exec") == 0) {
        char *args[] = {argv[0], "after-exec", NULL};
        execv("/proc/self/exe", args);
        perror("comm: execv");
        return 1;
    }
    return 0;
}
