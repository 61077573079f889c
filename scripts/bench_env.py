"""What the benchmark scripts share: every run's environment, fixed.

`unwindlab exec` hands the host's environment to the guest, and Debian's
bash started with SHLVL unset or 0 sources /etc/bash.bashrc and ~/.bashrc
(what bash does when it believes sshd started it): on a machine with a busy
~/.bashrc that would be the work measured, a hundred times the workload's.
Both sides of a comparison (qemu-user, the native program) get it too."""

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C", "SHLVL": "1"}
