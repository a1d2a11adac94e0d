#ifndef PAUSING_VFS_H
#define PAUSING_VFS_H

// A test VFS: it wraps the process's default SQLite VFS (unix) and reports each file operation
// on a watched folder to an observer before and after the real call. The observer runs on the
// connection's own thread, inside the call: it can record the event, block the connection there
// until a test releases it, or fail the call. Nothing else changes: with no observer the VFS
// forwards every call at the cost of one atomic load.
//
// Test code only: the library never registers it. TestSupport's `PausingVFS` is the Swift side.

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The operations the VFS reports.
typedef enum {
    PAUSING_VFS_OPEN = 1,      // xOpen
    PAUSING_VFS_CLOSE,         // xClose
    PAUSING_VFS_READ,          // xRead: offset, amount
    PAUSING_VFS_WRITE,         // xWrite: offset, amount
    PAUSING_VFS_TRUNCATE,      // xTruncate: offset is the new size
    PAUSING_VFS_SYNC,          // xSync
    PAUSING_VFS_LOCK,          // xLock: level (SQLITE_LOCK_SHARED … EXCLUSIVE)
    PAUSING_VFS_UNLOCK,        // xUnlock: level (SQLITE_LOCK_NONE or SHARED)
    PAUSING_VFS_SHM_MAP,       // xShmMap: offset is the region
    PAUSING_VFS_SHM_LOCK,      // xShmLock: level is the flags, offset the first slot, amount the slots
    PAUSING_VFS_SHM_UNMAP,     // xShmUnmap: level is deleteFlag
    PAUSING_VFS_DELETE,        // xDelete (of the VFS, by path)
} pausing_vfs_operation;

/// Which of a database's files an event is about.
typedef enum {
    PAUSING_VFS_MAIN_DB = 1,
    PAUSING_VFS_MAIN_JOURNAL,
    PAUSING_VFS_WAL,
    PAUSING_VFS_OTHER,
} pausing_vfs_file_kind;

typedef struct {
    int operation;          // pausing_vfs_operation
    int after;              // 0: before the real call, 1: after it (result holds its code)
    int kind;               // pausing_vfs_file_kind (PAUSING_VFS_OTHER for xDelete of an unknown name)
    const char *path;       // the file's path: valid only during the call
    int level;              // lock level, shm flags, or deleteFlag (see the operations)
    int64_t offset;         // read/write/truncate offset or size, shm region or first slot
    int amount;             // read/write bytes, shm slots
    int result;             // after: the real call's SQLite result code
    const void *file;       // the sqlite3_file of this open file (NULL for xDelete): tells connections apart
    const char *actor;      // the calling thread's actor name (pausing_vfs_set_actor), or NULL
} pausing_vfs_event;

/// Called for every event on a file whose path starts with the observer's prefix. Before the
/// real call, a result other than 0 (SQLITE_OK) fails the call with that code and skips it;
/// after it, the result replaces the real one (return event->result to keep it).
typedef int (*pausing_vfs_observer)(void *context, const pausing_vfs_event *event);

/// Registers the VFS as the process's default, wrapping the default before it; only the first
/// call does anything. Connections opened afterwards go through it. Returns an SQLite result code.
int pausing_vfs_install(void);

/// Starts reporting events on paths that start with `prefix` to `observer`; returns a token for
/// pausing_vfs_unwatch, or -1 when 16 watches are active already.
int pausing_vfs_watch(const char *prefix, pausing_vfs_observer observer, void *context);

/// Stops the watch `token`; events already being reported finish first.
void pausing_vfs_unwatch(int token);

/// Names the calling thread in the events it causes (NULL: no name); the string must outlive
/// the thread's use of it.
void pausing_vfs_set_actor(const char *actor);

#ifdef __cplusplus
}
#endif

#endif
