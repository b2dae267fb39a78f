/* SPDX-License-Identifier: GPL-2.0 */
/*
 * guardian.h - the pins guarded, not only watched: asmguard's own BPF objects
 * (its maps, programs and links) are the daemon's alone.
 *
 * Where the backend attaches to the `bpf` security hook (lsm/bpf, or
 * fmod_ret/security_bpf), a task that is not the daemon may not:
 *   - get a file descriptor by id for one of asmguard's maps, programs or
 *     links (BPF_MAP/PROG/LINK_GET_FD_BY_ID);
 *   - update or delete entries of one of its maps, freeze it, or update or
 *     delete them in batches (the map is resolved from the fd in the
 *     caller's fd table: an fd got from a pin with BPF_OBJ_GET, or inherited,
 *     gives no more than one by id);
 *   - update or detach one of its links (BPF_LINK_UPDATE, BPF_LINK_DETACH).
 * nor get any fd onto one of its maps or programs, read-only ones included
 * (a pin's BPF_OBJ_GET, by id, or taken from the daemon: the bpf_map,
 * bpf_prog and file_receive rules below): `bpftool map dump pinned ...` is
 * refused while the daemon runs (and works while none does). Unlinking a pin
 * is the pin rule's (pins.h):
 * the host's root may (a reboot-free `make uninstall` relies on it).
 *
 * Who the daemon is: ag_guardian holds its tgid (in the initial pid
 * namespace) and its thread-group leader's start_boottime. The daemon writes
 * its tgid with start 0 at load ("the claim"); the kernel fills the start in
 * on the daemon's next bpf() call, so that a pid reused after the daemon died
 * is nobody. When the daemon's leader exits (ag_guardian_exit, on
 * sched_process_exit), the record is cleared: vacant. While it is vacant no
 * task is refused (no daemon runs: nothing would put the maps back either),
 * and the next daemon claims it first thing at load. That daemon is the one
 * that holds the pin directory's lock (crates/guard/src/pins.rs): a second
 * daemon on the same pins stops before it loads anything, so the only task
 * that claims a vacancy in the ordinary run of things is the new daemon. A
 * claim by another task (root killing the daemon and racing its restart)
 * locks the restarted daemon out: it says so (an ERROR line, `status`), and
 * the vacancy comes back when that task exits.
 *
 * The objects: ag_guarded, {kind, id}, filled by the daemon at load with the
 * ids of its maps, programs and links.
 *
 * Used by bpf/guard.bpf.c (the programs are here). Needs asmguard_core.h and
 * guard.h first.
 */
#ifndef ASMGUARD_GUARDIAN_H
#define ASMGUARD_GUARDIAN_H

/* bpf() commands (uapi enum bpf_cmd) */
#define AG_BPF_MAP_UPDATE_ELEM 2
#define AG_BPF_MAP_DELETE_ELEM 3
#define AG_BPF_PROG_GET_FD_BY_ID 13
#define AG_BPF_MAP_GET_FD_BY_ID 14
#define AG_BPF_MAP_LOOKUP_AND_DELETE_ELEM 21
#define AG_BPF_MAP_FREEZE 22
#define AG_BPF_MAP_LOOKUP_AND_DELETE_BATCH 25
#define AG_BPF_MAP_UPDATE_BATCH 26
#define AG_BPF_MAP_DELETE_BATCH 27
#define AG_BPF_LINK_UPDATE 29
#define AG_BPF_LINK_GET_FD_BY_ID 30
#define AG_BPF_LINK_DETACH 34

/* Where union bpf_attr holds what the rule reads (uapi, fixed): the id of the
 * *_GET_FD_BY_ID commands, and the map or link fd of the others, is its first
 * u32; the batch commands' map_fd follows in_batch, out_batch, keys, values
 * (u64 each) and count (u32). */
#define AG_ATTR_FIRST 0
#define AG_ATTR_BATCH_MAP_FD 36

/* Kinds of ag_guarded keys. */
#define AG_OBJ_MAP 1
#define AG_OBJ_PROG 2
#define AG_OBJ_LINK 3

struct ag_obj_key {
	__u32 kind; /* AG_OBJ_* */
	__u32 id;   /* the kernel's id of the map, program or link */
};

/* The daemon; zero: vacant. */
struct ag_guardian {
	__u32 tgid;  /* in the initial pid namespace */
	__u32 pad;   /* zero */
	__u64 start; /* its leader's start_boottime; 0: filled on its next bpf() */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 512);
	__type(key, struct ag_obj_key);
	__type(value, __u8);
} ag_guarded SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ag_guardian);
} ag_guardian SEC(".maps");

/* Kernel types read here alone: flavours (the ___ag suffix is ignored by
 * CO-RE) so that asmguard_core.h's declarations stay as they are. */
struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct task_struct___ag {
	struct files_struct *files;
} __attribute__((preserve_access_index));

struct bpf_map {
	__u32 id;
} __attribute__((preserve_access_index));

struct bpf_prog;

struct bpf_link {
	__u32 id;
	struct bpf_prog *prog;
} __attribute__((preserve_access_index));

/* Whether the calling task may touch asmguard's objects: it is the daemon,
 * or no daemon holds the record (vacant). Fills the daemon's start in on its
 * first call after the claim. */
static __always_inline bool guardian_allows(void)
{
	__u32 zero = 0;
	struct ag_guardian *g = bpf_map_lookup_elem(&ag_guardian, &zero);
	struct task_struct *t;
	__u64 start;

	if (!g || g->tgid == 0)
		return true;
	if (g->tgid != (__u32)(bpf_get_current_pid_tgid() >> 32))
		return false;
	t = (struct task_struct *)bpf_get_current_task();
	start = BPF_CORE_READ(t, group_leader, start_boottime);
	if (g->start == 0) {
		g->start = start;
		return true;
	}
	return g->start == start;
}

/* The id of the map (AG_OBJ_MAP) or link (AG_OBJ_LINK) behind the caller's
 * fd `fd` (0: none). A file that is not a map (or link) gives whatever
 * number its private data holds there: a false match only refuses a command
 * the kernel would refuse anyway (it wants that kind of fd). */
static __always_inline __u32 fd_object_id(__u32 fd, __u32 kind)
{
	struct task_struct___ag *t = (void *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	struct file **fds;
	struct file *f = NULL;
	void *priv;

	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return 0;
	priv = BPF_CORE_READ(f, private_data);
	if (!priv)
		return 0;
	if (kind == AG_OBJ_MAP)
		return BPF_CORE_READ((struct bpf_map *)priv, id);
	return BPF_CORE_READ((struct bpf_link *)priv, id);
}

static __always_inline __u32 attr_u32(void *attr, __u32 off)
{
	__u32 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), attr + off);
	return v;
}

/* bpf(cmd, attr): -EPERM when it would hand out, change or detach one of
 * asmguard's objects and the caller is not the daemon. */
static __always_inline int guardian_rule(int cmd, void *attr)
{
	struct ag_obj_key k = {};

	switch (cmd) {
	case AG_BPF_MAP_GET_FD_BY_ID:
		k.kind = AG_OBJ_MAP;
		k.id = attr_u32(attr, AG_ATTR_FIRST);
		break;
	case AG_BPF_PROG_GET_FD_BY_ID:
		k.kind = AG_OBJ_PROG;
		k.id = attr_u32(attr, AG_ATTR_FIRST);
		break;
	case AG_BPF_LINK_GET_FD_BY_ID:
		k.kind = AG_OBJ_LINK;
		k.id = attr_u32(attr, AG_ATTR_FIRST);
		break;
	case AG_BPF_MAP_UPDATE_ELEM:
	case AG_BPF_MAP_DELETE_ELEM:
	case AG_BPF_MAP_LOOKUP_AND_DELETE_ELEM:
	case AG_BPF_MAP_FREEZE:
		k.kind = AG_OBJ_MAP;
		k.id = fd_object_id(attr_u32(attr, AG_ATTR_FIRST), AG_OBJ_MAP);
		break;
	case AG_BPF_MAP_LOOKUP_AND_DELETE_BATCH:
	case AG_BPF_MAP_UPDATE_BATCH:
	case AG_BPF_MAP_DELETE_BATCH:
		k.kind = AG_OBJ_MAP;
		k.id = fd_object_id(attr_u32(attr, AG_ATTR_BATCH_MAP_FD), AG_OBJ_MAP);
		break;
	case AG_BPF_LINK_UPDATE:
	case AG_BPF_LINK_DETACH:
		k.kind = AG_OBJ_LINK;
		k.id = fd_object_id(attr_u32(attr, AG_ATTR_FIRST), AG_OBJ_LINK);
		break;
	default:
		/* every other command: only the daemon's start is filled in */
		guardian_allows();
		return 0;
	}
	if (guardian_allows())
		return 0;
	if (k.id == 0 || !bpf_map_lookup_elem(&ag_guarded, &k))
		return 0;
	return -EPERM;
}

/* The hook's arguments: (cmd, attr, size) up to 6.15, (cmd, attr, size,
 * kernel) since: only the first two are read, and no earlier verdict (an
 * earlier program's non-zero return ends the chain before this one runs). */
SEC("lsm/bpf")
int BPF_PROG(ag_bpf, int cmd, void *attr)
{
	return guardian_rule(cmd, attr);
}

SEC("fmod_ret/security_bpf")
int BPF_PROG(ag_fr_bpf, int cmd, void *attr)
{
	return guardian_rule(cmd, attr);
}

/* ---- The objects themselves (issue 41, point 3) ----
 *
 * The rule above judges bpf() commands by the fd they name, read from the
 * caller's fd table before the command's own fdget: an fd got from a pin
 * (BPF_OBJ_GET) was no bar to a program of the caller's, loaded with that
 * fd and run with BPF_PROG_TEST_RUN, writing the map from inside the kernel,
 * and another thread's dup2 between the two reads could swap the fd judged.
 * The hooks below see the object itself, where the kernel makes a new fd
 * onto it (bpf_map_new_fd, bpf_prog_new_fd: BPF_OBJ_GET on a pin, the
 * *_GET_FD_BY_ID commands) or installs an fd another task sent or held
 * (security_file_receive: SCM_RIGHTS, pidfd_getfd on the daemon): no task
 * but the daemon gets an fd onto one of asmguard's maps or programs (nor,
 * received, onto one of its links), read-only ones included (a program
 * loaded with a read-only map fd may still write the map). While the record
 * is vacant (no daemon) nothing is refused, as above. */

struct bpf_prog_aux {
	__u32 id;
} __attribute__((preserve_access_index));

struct bpf_prog {
	struct bpf_prog_aux *aux;
} __attribute__((preserve_access_index));

/* -EPERM when {kind, id} is one of asmguard's objects and the caller is not
 * the daemon. */
static __always_inline int guardian_object_rule(__u32 kind, __u32 id)
{
	struct ag_obj_key k = { .kind = kind, .id = id };

	if (id == 0 || !bpf_map_lookup_elem(&ag_guarded, &k))
		return 0;
	if (guardian_allows())
		return 0;
	return -EPERM;
}

/* The anonymous inode names of the kernel's BPF object files (anon_inode:
 * "bpf-map", "bpf-prog", "bpf_link"), as little-endian words of 8 bytes
 * (the name and its NUL). */
#define AG_ANON_BPF_MAP 0x0070616d2d667062ULL  /* "bpf-map\0" */
#define AG_ANON_BPF_PROG 0x676f72702d667062ULL /* "bpf-prog" (then NUL) */
#define AG_ANON_BPF_LINK 0x6b6e696c5f667062ULL /* "bpf_link" (then NUL) */

/* A file installed in the caller's fd table from elsewhere: one of
 * asmguard's maps, programs or links is the daemon's alone. */
static __always_inline int guardian_receive_rule(struct file *file)
{
	const unsigned char *name = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	__u64 w = 0;
	__u8 nul = 1;
	void *priv;

	if (!name || bpf_probe_read_kernel(&w, sizeof(w), name))
		return 0;
	if (w != AG_ANON_BPF_MAP && w != AG_ANON_BPF_PROG && w != AG_ANON_BPF_LINK)
		return 0;
	if (w != AG_ANON_BPF_MAP && (bpf_probe_read_kernel(&nul, 1, name + 8) || nul))
		return 0;
	priv = BPF_CORE_READ(file, private_data);
	if (!priv)
		return 0;
	if (w == AG_ANON_BPF_MAP)
		return guardian_object_rule(AG_OBJ_MAP, BPF_CORE_READ((struct bpf_map *)priv, id));
	if (w == AG_ANON_BPF_PROG)
		return guardian_object_rule(AG_OBJ_PROG, BPF_CORE_READ((struct bpf_prog *)priv, aux, id));
	return guardian_object_rule(AG_OBJ_LINK, BPF_CORE_READ((struct bpf_link *)priv, id));
}

/* ---- A link's pin opened (issue 41, point 3) ----
 *
 * BPF_OBJ_GET on a pinned link makes an fd with no hook on the way
 * (bpf_link_new_fd), and BPF_LINK_DETACH and BPF_LINK_UPDATE are judged
 * above from the caller's fd table before the command's own fdget: a second
 * thread's dup2(link fd, /dev/null's fd) in between made the guardian judge
 * /dev/null and the kernel detach asmguard's cgroup-device link (the lab's
 * pinguard test, link-race). The pin's open is where the kernel looks at the
 * object first: bpf_obj_do_get's permission check of the pin's inode
 * (path_permission -> security_inode_permission, with MAY_READ and/or
 * MAY_WRITE: the fd's mode). A link of asmguard's (its id and its program's
 * both in ag_guarded: a map's or program's inode read as a link matches
 * neither) is the daemon's alone; the link fd no one else gets is the race
 * no one else runs. Path walks (MAY_EXEC alone) pay one test. */
#define AG_BPF_FS_MAGIC 0xcafe4a11UL
#define AG_MAY_WRITE 0x2
#define AG_MAY_READ 0x4
#define AG_S_IFREG 0100000

static __always_inline int guardian_pin_open_rule(struct inode *inode, int mask)
{
	struct inode *i = inode;
	struct bpf_link *l;
	struct ag_obj_key k = { .kind = AG_OBJ_LINK };

	if (!(mask & (AG_MAY_READ | AG_MAY_WRITE)) || !i)
		return 0;
	if (i->i_sb->s_magic != AG_BPF_FS_MAGIC || (i->i_mode & S_IFMT) != AG_S_IFREG)
		return 0;
	l = BPF_CORE_READ(i, i_private);
	if (!l)
		return 0;
	k.id = BPF_CORE_READ(l, id);
	if (k.id == 0 || !bpf_map_lookup_elem(&ag_guarded, &k))
		return 0;
	k.kind = AG_OBJ_PROG;
	k.id = BPF_CORE_READ(l, prog, aux, id);
	if (k.id == 0 || !bpf_map_lookup_elem(&ag_guarded, &k))
		return 0;
	if (guardian_allows())
		return 0;
	return -EPERM;
}

SEC("lsm/inode_permission")
int BPF_PROG(ag_inode_permission, struct inode *inode, int mask, int ret)
{
	return ret ?: guardian_pin_open_rule(inode, mask);
}

SEC("fmod_ret/security_inode_permission")
int BPF_PROG(ag_fr_inode_permission, struct inode *inode, int mask, int ret)
{
	return ret ?: guardian_pin_open_rule(inode, mask);
}

SEC("lsm/bpf_map")
int BPF_PROG(ag_bpf_map, struct bpf_map *map, unsigned int fmode, int ret)
{
	return ret ?: guardian_object_rule(AG_OBJ_MAP, BPF_CORE_READ(map, id));
}

SEC("fmod_ret/security_bpf_map")
int BPF_PROG(ag_fr_bpf_map, struct bpf_map *map, unsigned int fmode, int ret)
{
	return ret ?: guardian_object_rule(AG_OBJ_MAP, BPF_CORE_READ(map, id));
}

SEC("lsm/bpf_prog")
int BPF_PROG(ag_bpf_prog, struct bpf_prog *prog, int ret)
{
	return ret ?: guardian_object_rule(AG_OBJ_PROG, BPF_CORE_READ(prog, aux, id));
}

SEC("fmod_ret/security_bpf_prog")
int BPF_PROG(ag_fr_bpf_prog, struct bpf_prog *prog, int ret)
{
	return ret ?: guardian_object_rule(AG_OBJ_PROG, BPF_CORE_READ(prog, aux, id));
}

SEC("lsm/file_receive")
int BPF_PROG(ag_file_receive, struct file *file, int ret)
{
	return ret ?: guardian_receive_rule(file);
}

SEC("fmod_ret/security_file_receive")
int BPF_PROG(ag_fr_file_receive, struct file *file, int ret)
{
	return ret ?: guardian_receive_rule(file);
}

/* The daemon's leader exits: the record is vacant (a pid reused later is
 * nobody). Fires for every exiting task: one array lookup for the others. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ag_guardian_exit, struct task_struct *p)
{
	__u32 zero = 0;
	struct ag_guardian *g = bpf_map_lookup_elem(&ag_guardian, &zero);

	if (!g || g->tgid == 0)
		return 0;
	if (BPF_CORE_READ(p, pid) != (pid_t)g->tgid || BPF_CORE_READ(p, tgid) != (pid_t)g->tgid)
		return 0;
	if (g->start && BPF_CORE_READ(p, start_boottime) != g->start)
		return 0;
	g->tgid = 0;
	g->start = 0;
	return 0;
}

#endif /* ASMGUARD_GUARDIAN_H */
