/* A libc without O_CLOEXEC, for tests/compile.sh: the real <fcntl.h> with the flag
   taken away. The implementation must refuse to build (not open descriptors that a
   spawned child inherits). */
#include_next <fcntl.h>
#undef O_CLOEXEC
