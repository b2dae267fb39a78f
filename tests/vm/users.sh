#!/bin/bash
# tests/vm/users.sh - the lab's users and groups, defined once: the VM lab's
# initramfs, the system lab's image and its containers all write them (the
# system image puts the Oracle owners in its directory stand-in,
# libnss-extrausers, and the outsider in /etc/passwd).
# shellcheck disable=SC2034
LAB_GROUPS='oinstall:x:54321:grid,oracle
dba:x:54322:oracle
asmdba:x:54327:grid,oracle
asmoper:x:54328:grid
asmadmin:x:54329:grid
intruder:x:1001:'
# The Oracle software owners (passwd lines).
LAB_ORACLE_USERS='oracle:x:54321:54321:Oracle database owner:/home/oracle:/bin/sh
grid:x:54331:54321:Oracle grid owner:/home/grid:/bin/sh'
# The outsider every test's intruder is (passwd line).
LAB_INTRUDER='intruder:x:1001:1001:not an Oracle user:/home/intruder:/bin/sh'
