#!/usr/bin/env python3
"""Helpers of the scale benchmarks (scripts/bench-scale.sh, bench-lsdsk.sh): many labelled loop
devices on new device numbers, asmguardd's start -> READY=1, its CPU and RSS,
and an add-uevent storm timed until each disk is in the filter's map.

Not a test: every subcommand prints figures (JSON) for the calling script.

  images WORK N PREFIX          sparse 64 MiB images WORK/d<i>.img, label PREFIX<i>
  image FILE LABEL              one such image
  attach BASE WORK N            /dev/loop<BASE+i> on WORK/d<i>.img (new numbers only)
  detach BASE N                 detach them (the numbers stay)
  remove BASE N                 detach and delete the device numbers
  ready EXE NOTIFY PIDFILE LOG ARG...   start EXE ARG..., ms until READY=1
  usage PID SECONDS [URL]       CPU % and RSS of PID over SECONDS (one scrape of
                                URL per second when given)
  storm BASE WORK N MAPPIN      attach each device and send it an add uevent, as
                                fast as possible; per device, ms until its dev_t
                                is a key of the pinned map MAPPIN
"""

import fcntl
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request

LOOP_SET_FD = 0x4C00
LOOP_CLR_FD = 0x4C01
LOOP_CTL_ADD = 0x4C80
LOOP_CTL_REMOVE = 0x4C81
LABEL_BLOCK = 4096


def label_block(label):
    """Block 0 of a labelled disk: ORCLDISK + label at byte 32, and the XOR of
    the first 64 bytes' words at byte 12 (what asmguardctl writes)."""
    b = bytearray(LABEL_BLOCK)
    b[32:40] = b"ORCLDISK"
    b[40:40 + len(label)] = label
    x = 0
    for o in range(0, 64, 4):
        if o != 12:
            x ^= struct.unpack_from("<I", b, o)[0]
    struct.pack_into("<I", b, 12, x)
    return b


def image(path, label):
    with open(path, "wb") as f:
        f.write(label_block(label))
        f.truncate(64 << 20)


def images(work, n, prefix):
    for i in range(n):
        image(os.path.join(work, "d%d.img" % i), b"%s%d" % (prefix.encode(), i))


def ctl(op, num):
    fd = os.open("/dev/loop-control", os.O_RDWR)
    try:
        for _ in range(100):
            try:
                return fcntl.ioctl(fd, op, num)
            except OSError as e:
                if e.errno == 16:  # EBUSY: udev still has it open
                    time.sleep(0.02)
                    continue
                if op == LOOP_CTL_ADD and e.errno == 17:
                    raise SystemExit("loop%d exists already: choose another BASE" % num)
                if op == LOOP_CTL_REMOVE and e.errno in (2, 19):
                    return None
                raise
    finally:
        os.close(fd)


def attach_one(num, img):
    """Binds /dev/loop<num> to img; returns the time it was bound."""
    if not os.path.exists("/sys/class/block/loop%d" % num):
        ctl(LOOP_CTL_ADD, num)
    dev = "/dev/loop%d" % num
    for _ in range(100):  # devtmpfs makes the node a moment after the add
        if os.path.exists(dev):
            break
        time.sleep(0.01)
    lfd = os.open(dev, os.O_RDWR)
    ffd = os.open(img, os.O_RDWR)
    try:
        fcntl.ioctl(lfd, LOOP_SET_FD, ffd)
    finally:
        os.close(ffd)
        os.close(lfd)
    return time.monotonic()


def detach(base, n):
    for i in range(n):
        try:
            # read-only: a write-open of a protected disk is denied
            fd = os.open("/dev/loop%d" % (base + i), os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.ioctl(fd, LOOP_CLR_FD, 0)
        except OSError:
            pass
        finally:
            os.close(fd)


def ready(exe, notify, pidfile, log, args):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(notify)
    s.settimeout(300)
    env = dict(os.environ, NOTIFY_SOCKET=notify)
    t0 = time.monotonic()
    p = subprocess.Popen([exe] + args, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=open(log, "w"),
                         start_new_session=True)
    with open(pidfile, "w") as f:
        f.write(str(p.pid))
    while True:
        m = s.recv(4096).decode()
        if "READY=1" in m.split("\n"):
            return {"ready_ms": round((time.monotonic() - t0) * 1000, 1)}


def cpu_ticks(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def status_kib(pid, key):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def usage(pid, seconds, url=None):
    hz = os.sysconf("SC_CLK_TCK")
    scrapes = []
    c0, t0 = cpu_ticks(pid), time.monotonic()
    for k in range(seconds):
        if url:
            s0 = time.monotonic()
            with urllib.request.urlopen(url, timeout=30) as r:
                r.read()
            scrapes.append((time.monotonic() - s0) * 1000)
        time.sleep(max(0.0, t0 + k + 1 - time.monotonic()))
    c1, t1 = cpu_ticks(pid), time.monotonic()
    out = {
        "cpu_percent": round((c1 - c0) / hz / (t1 - t0) * 100, 2),
        "rss_mib": round(status_kib(pid, "VmRSS") / 1024, 1),
        "hwm_mib": round(status_kib(pid, "VmHWM") / 1024, 1),
        "seconds": round(t1 - t0, 1),
    }
    if scrapes:
        scrapes.sort()
        out["scrape_ms_median"] = round(scrapes[len(scrapes) // 2], 1)
        out["scrape_ms_max"] = round(scrapes[-1], 1)
    return out


def map_keys(pin):
    """Kernel dev_t keys of a pinned hash map (u32, little endian)."""
    out = subprocess.run(["bpftool", "map", "dump", "pinned", pin, "--json"],
                         capture_output=True, text=True, check=True).stdout
    keys = set()
    for e in json.loads(out):
        if "formatted" in e:
            keys.add(int(e["formatted"]["key"]))
        else:
            keys.add(int.from_bytes(bytes(int(b, 16) for b in e["key"]), "little"))
    return keys


def pct(sorted_ms, p):
    return sorted_ms[min(len(sorted_ms) - 1, int(len(sorted_ms) * p / 100))]


def storm(base, work, n, pin):
    devs = {(7 << 20) | (base + i): i for i in range(n)}
    seen = {}
    polls = []
    done = threading.Event()

    def poll():
        while not done.is_set():
            p0 = time.monotonic()
            keys = map_keys(pin)
            now = time.monotonic()
            polls.append((now - p0) * 1000)
            for k in keys:
                if k in devs and devs[k] not in seen:
                    seen[devs[k]] = now
            if len(seen) == n:
                done.set()

    before = map_keys(pin) & set(devs)
    if before:
        raise SystemExit("%d of the devices are protected before the storm" % len(before))
    th = threading.Thread(target=poll)
    th.start()
    added = {}
    t0 = time.monotonic()
    for i in range(n):
        added[i] = attach_one(base + i, os.path.join(work, "d%d.img" % i))
        with open("/sys/class/block/loop%d/uevent" % (base + i), "w") as f:
            f.write("add")
    t_sent = time.monotonic()
    done.wait(timeout=300)
    done.set()
    th.join()
    lat = sorted((seen[i] - added[i]) * 1000 for i in seen)
    polls.sort()
    return {
        "devices": n,
        "protected": len(seen),
        "storm_ms": round((t_sent - t0) * 1000, 1),
        "last_protected_ms": round((max(seen.values()) - t0) * 1000, 1) if seen else None,
        "latency_ms_p50": round(pct(lat, 50), 1) if lat else None,
        "latency_ms_p99": round(pct(lat, 99), 1) if lat else None,
        "latency_ms_max": round(lat[-1], 1) if lat else None,
        "map_poll_ms_median": round(polls[len(polls) // 2], 1) if polls else None,
    }


def main(argv):
    cmd, a = argv[1], argv[2:]
    if cmd == "images":
        images(a[0], int(a[1]), a[2])
    elif cmd == "image":
        image(a[0], a[1].encode())
    elif cmd == "attach":
        for i in range(int(a[2])):
            attach_one(int(a[0]) + i, os.path.join(a[1], "d%d.img" % i))
    elif cmd == "detach":
        detach(int(a[0]), int(a[1]))
    elif cmd == "remove":
        detach(int(a[0]), int(a[1]))
        for i in range(int(a[1])):
            ctl(LOOP_CTL_REMOVE, int(a[0]) + i)
    elif cmd == "ready":
        print(json.dumps(ready(a[0], a[1], a[2], a[3], a[4:])))
    elif cmd == "usage":
        print(json.dumps(usage(int(a[0]), int(a[1]), a[2] if len(a) > 2 else None)))
    elif cmd == "storm":
        print(json.dumps(storm(int(a[0]), a[1], int(a[2]), a[3])))
    else:
        raise SystemExit("unknown subcommand " + cmd)


if __name__ == "__main__":
    main(sys.argv)
