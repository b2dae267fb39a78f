#!/bin/bash
# tests/vm/users.sh - the lab's Oracle groups, with the VM lab's ids and members:
# the VM lab's initramfs and the system lab's image both write them to /etc/group.
# (Users differ: the system image has grid and oracle only in its directory
# stand-in, libnss-extrausers.)
# shellcheck disable=SC2034
LAB_GROUPS='oinstall:x:54321:grid,oracle
dba:x:54322:oracle
asmdba:x:54327:grid,oracle
asmoper:x:54328:grid
asmadmin:x:54329:grid
intruder:x:1001:'
