#!/bin/bash
# tests/system/env.sh - the set-up both system labs share (run.sh: one guest per
# kernel line; pair.sh: two guests sharing disks): the paths, and the VM lab's
# and this lab's shell functions. Sourced with SYS_DIR set; defines functions and
# variables only.
SYS_ROOT=$(cd "$SYS_DIR/../.." && pwd)
SYS_WORK=${SYS_WORK:-$SYS_DIR/work}
VM_DIR=$SYS_ROOT/tests/vm
VM_WORK=$SYS_WORK/kernels
export VM_DIR VM_WORK
. "$VM_DIR/deps.sh"
. "$VM_DIR/kernels.sh"
. "$VM_DIR/results.sh"
. "$SYS_DIR/image.sh"
. "$SYS_DIR/report.sh"
