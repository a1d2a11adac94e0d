// The pausing test VFS (see include/PausingVFS.h): a shim over the default unix VFS that reports
// each call on a watched file to an observer before and after forwarding it.

#ifndef SQLITE_HAS_CODEC
#define SQLITE_HAS_CODEC 1
#endif
#include <sqlcipher/sqlite3.h>

#include "PausingVFS.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

// MARK: Watches

#define MAX_WATCHES 16

typedef struct {
    int active;
    char *prefix;
    size_t prefixLength;
    pausing_vfs_observer observer;
    void *context;
    int inFlight;  // events being reported to this watch now
} watch;

static pthread_mutex_t watchLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watchDone = PTHREAD_COND_INITIALIZER;
static watch watches[MAX_WATCHES];
static atomic_int activeWatches;
static _Thread_local const char *threadActor;

void pausing_vfs_set_actor(const char *actor) { threadActor = actor; }

int pausing_vfs_watch(const char *prefix, pausing_vfs_observer observer, void *context) {
    pthread_mutex_lock(&watchLock);
    int token = -1;
    for (int index = 0; index < MAX_WATCHES; index++) {
        if (watches[index].active || watches[index].inFlight > 0) continue;
        watches[index] = (watch){1, strdup(prefix), strlen(prefix), observer, context, 0};
        atomic_fetch_add(&activeWatches, 1);
        token = index;
        break;
    }
    pthread_mutex_unlock(&watchLock);
    return token;
}

void pausing_vfs_unwatch(int token) {
    if (token < 0 || token >= MAX_WATCHES) return;
    pthread_mutex_lock(&watchLock);
    if (watches[token].active) {
        watches[token].active = 0;
        atomic_fetch_sub(&activeWatches, 1);
        while (watches[token].inFlight > 0) pthread_cond_wait(&watchDone, &watchLock);
        free(watches[token].prefix);
        watches[token].prefix = NULL;
    }
    pthread_mutex_unlock(&watchLock);
}

/// Reports `event` to every watch whose prefix starts the path; returns the last observer's
/// verdict, or `fallback` when no observer answered.
static int report(pausing_vfs_event *event, int fallback) {
    if (atomic_load_explicit(&activeWatches, memory_order_relaxed) == 0 || event->path == NULL) return fallback;
    int matched[MAX_WATCHES];
    int count = 0;
    pthread_mutex_lock(&watchLock);
    for (int index = 0; index < MAX_WATCHES; index++) {
        if (watches[index].active && strncmp(event->path, watches[index].prefix, watches[index].prefixLength) == 0) {
            watches[index].inFlight += 1;
            matched[count++] = index;
        }
    }
    pthread_mutex_unlock(&watchLock);
    if (count == 0) return fallback;
    event->actor = threadActor;
    int verdict = fallback;
    for (int index = 0; index < count; index++) {
        watch *current = &watches[matched[index]];
        verdict = current->observer(current->context, event);
    }
    pthread_mutex_lock(&watchLock);
    for (int index = 0; index < count; index++) watches[matched[index]].inFlight -= 1;
    pthread_cond_broadcast(&watchDone);
    pthread_mutex_unlock(&watchLock);
    return verdict;
}

// MARK: Files

typedef struct {
    sqlite3_file base;
    sqlite3_file *real;   // the wrapped VFS's file, in the same allocation right after this struct
    const char *path;     // SQLite keeps the name alive until xClose
    int kind;
} pausing_file;

static sqlite3_vfs *realVFS;

#define FILE_OF(f) ((pausing_file *)(f))
#define REAL(f) (FILE_OF(f)->real)

/// Runs `call` between a before-event and an after-event on file `f`.
#define OBSERVED(f, op, lvl, off, amt, call)                                                      \
    do {                                                                                          \
        pausing_vfs_event event = {(op), 0, FILE_OF(f)->kind, FILE_OF(f)->path, (lvl), (off),     \
                                   (amt), SQLITE_OK, (f), NULL};                                  \
        int verdict = report(&event, SQLITE_OK);                                                  \
        if (verdict != SQLITE_OK) return verdict;                                                 \
        int result = (call);                                                                      \
        event.after = 1;                                                                          \
        event.result = result;                                                                    \
        return report(&event, result);                                                            \
    } while (0)

static int pClose(sqlite3_file *f) {
    pausing_vfs_event event = {PAUSING_VFS_CLOSE, 0, FILE_OF(f)->kind, FILE_OF(f)->path, 0, 0, 0, SQLITE_OK, f, NULL};
    report(&event, SQLITE_OK);
    int result = REAL(f)->pMethods->xClose(REAL(f));
    event.after = 1;
    event.result = result;
    report(&event, result);
    return result;
}
static int pRead(sqlite3_file *f, void *buffer, int amount, sqlite3_int64 offset) {
    OBSERVED(f, PAUSING_VFS_READ, 0, offset, amount, REAL(f)->pMethods->xRead(REAL(f), buffer, amount, offset));
}
static int pWrite(sqlite3_file *f, const void *buffer, int amount, sqlite3_int64 offset) {
    OBSERVED(f, PAUSING_VFS_WRITE, 0, offset, amount, REAL(f)->pMethods->xWrite(REAL(f), buffer, amount, offset));
}
static int pTruncate(sqlite3_file *f, sqlite3_int64 size) {
    OBSERVED(f, PAUSING_VFS_TRUNCATE, 0, size, 0, REAL(f)->pMethods->xTruncate(REAL(f), size));
}
static int pSync(sqlite3_file *f, int flags) {
    OBSERVED(f, PAUSING_VFS_SYNC, flags, 0, 0, REAL(f)->pMethods->xSync(REAL(f), flags));
}
static int pFileSize(sqlite3_file *f, sqlite3_int64 *size) { return REAL(f)->pMethods->xFileSize(REAL(f), size); }
static int pLock(sqlite3_file *f, int level) {
    OBSERVED(f, PAUSING_VFS_LOCK, level, 0, 0, REAL(f)->pMethods->xLock(REAL(f), level));
}
static int pUnlock(sqlite3_file *f, int level) {
    OBSERVED(f, PAUSING_VFS_UNLOCK, level, 0, 0, REAL(f)->pMethods->xUnlock(REAL(f), level));
}
static int pCheckReservedLock(sqlite3_file *f, int *out) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out); }
static int pFileControl(sqlite3_file *f, int op, void *argument) {
    int result = REAL(f)->pMethods->xFileControl(REAL(f), op, argument);
    // The VFS name SQLite reports (PRAGMA vfs_list, SQLITE_FCNTL_VFSNAME) gains this layer's.
    if (op == SQLITE_FCNTL_VFSNAME && result == SQLITE_OK && argument != NULL) {
        char *below = *(char **)argument;
        *(char **)argument = sqlite3_mprintf("pausing/%z", below);
    }
    return result;
}
static int pSectorSize(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int pDeviceCharacteristics(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int pShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
    OBSERVED(f, PAUSING_VFS_SHM_MAP, extend, region, size, REAL(f)->pMethods->xShmMap(REAL(f), region, size, extend, out));
}
static int pShmLock(sqlite3_file *f, int offset, int count, int flags) {
    OBSERVED(f, PAUSING_VFS_SHM_LOCK, flags, offset, count, REAL(f)->pMethods->xShmLock(REAL(f), offset, count, flags));
}
static void pShmBarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int pShmUnmap(sqlite3_file *f, int deleteFlag) {
    OBSERVED(f, PAUSING_VFS_SHM_UNMAP, deleteFlag, 0, 0, REAL(f)->pMethods->xShmUnmap(REAL(f), deleteFlag));
}
static int pFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **out) {
    return REAL(f)->pMethods->xFetch(REAL(f), offset, amount, out);
}
static int pUnfetch(sqlite3_file *f, sqlite3_int64 offset, void *page) {
    return REAL(f)->pMethods->xUnfetch(REAL(f), offset, page);
}

// One table per version of the wrapped file's methods, so that SQLite sees the same abilities.
#define METHODS(version)                                                                             \
    {version, pClose, pRead, pWrite, pTruncate, pSync, pFileSize, pLock, pUnlock, pCheckReservedLock, \
     pFileControl, pSectorSize, pDeviceCharacteristics, pShmMap, pShmLock, pShmBarrier, pShmUnmap,    \
     pFetch, pUnfetch}
static const sqlite3_io_methods methodsV1 = METHODS(1);
static const sqlite3_io_methods methodsV2 = METHODS(2);
static const sqlite3_io_methods methodsV3 = METHODS(3);

static int kindOf(int flags) {
    if (flags & SQLITE_OPEN_MAIN_DB) return PAUSING_VFS_MAIN_DB;
    if (flags & SQLITE_OPEN_MAIN_JOURNAL) return PAUSING_VFS_MAIN_JOURNAL;
    if (flags & SQLITE_OPEN_WAL) return PAUSING_VFS_WAL;
    return PAUSING_VFS_OTHER;
}

static int kindOfName(const char *path) {
    size_t length = strlen(path);
    if (length > 4 && strcmp(path + length - 4, "-wal") == 0) return PAUSING_VFS_WAL;
    if (length > 8 && strcmp(path + length - 8, "-journal") == 0) return PAUSING_VFS_MAIN_JOURNAL;
    return PAUSING_VFS_OTHER;
}

// MARK: The VFS

static int vOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    pausing_file *file = FILE_OF(f);
    file->base.pMethods = NULL;
    file->real = (sqlite3_file *)&file[1];
    file->path = name;
    file->kind = kindOf(flags);
    pausing_vfs_event event = {PAUSING_VFS_OPEN, 0, file->kind, name, flags, 0, 0, SQLITE_OK, f, NULL};
    int verdict = report(&event, SQLITE_OK);
    if (verdict != SQLITE_OK) return verdict;
    int result = realVFS->xOpen(realVFS, name, file->real, flags, outFlags);
    if (file->real->pMethods != NULL) {
        int version = file->real->pMethods->iVersion;
        file->base.pMethods = version >= 3 ? &methodsV3 : version == 2 ? &methodsV2 : &methodsV1;
    }
    event.after = 1;
    event.result = result;
    return report(&event, result);
}

static int vDelete(sqlite3_vfs *vfs, const char *name, int syncDir) {
    (void)vfs;
    pausing_vfs_event event = {PAUSING_VFS_DELETE, 0, kindOfName(name), name, syncDir, 0, 0, SQLITE_OK, NULL, NULL};
    int verdict = report(&event, SQLITE_OK);
    if (verdict != SQLITE_OK) return verdict;
    int result = realVFS->xDelete(realVFS, name, syncDir);
    event.after = 1;
    event.result = result;
    return report(&event, result);
}

static int vAccess(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    (void)vfs;
    return realVFS->xAccess(realVFS, name, flags, out);
}
static int vFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return realVFS->xFullPathname(realVFS, name, size, out);
}
static void *vDlOpen(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return realVFS->xDlOpen(realVFS, name);
}
static void vDlError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    realVFS->xDlError(realVFS, size, out);
}
static void (*vDlSym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) {
    (void)vfs;
    return realVFS->xDlSym(realVFS, handle, symbol);
}
static void vDlClose(sqlite3_vfs *vfs, void *handle) {
    (void)vfs;
    realVFS->xDlClose(realVFS, handle);
}
static int vRandomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return realVFS->xRandomness(realVFS, size, out);
}
static int vSleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return realVFS->xSleep(realVFS, microseconds);
}
static int vCurrentTime(sqlite3_vfs *vfs, double *out) {
    (void)vfs;
    return realVFS->xCurrentTime(realVFS, out);
}
static int vGetLastError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return realVFS->xGetLastError ? realVFS->xGetLastError(realVFS, size, out) : 0;
}
static int vCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    (void)vfs;
    return realVFS->xCurrentTimeInt64(realVFS, out);
}
static int vSetSystemCall(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr call) {
    (void)vfs;
    return realVFS->xSetSystemCall(realVFS, name, call);
}
static sqlite3_syscall_ptr vGetSystemCall(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return realVFS->xGetSystemCall(realVFS, name);
}
static const char *vNextSystemCall(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return realVFS->xNextSystemCall(realVFS, name);
}

static sqlite3_vfs pausingVFS;
static pthread_once_t installOnce = PTHREAD_ONCE_INIT;
static int installResult = SQLITE_OK;

static void install(void) {
    installResult = sqlite3_initialize();
    if (installResult != SQLITE_OK) return;
    realVFS = sqlite3_vfs_find(NULL);
    if (realVFS == NULL || realVFS->iVersion < 3) {
        installResult = SQLITE_ERROR;
        return;
    }
    pausingVFS = (sqlite3_vfs){
        3, (int)sizeof(pausing_file) + realVFS->szOsFile, realVFS->mxPathname, NULL, "pausing", NULL,
        vOpen, vDelete, vAccess, vFullPathname, vDlOpen, vDlError, vDlSym, vDlClose, vRandomness, vSleep,
        vCurrentTime, vGetLastError, vCurrentTimeInt64, vSetSystemCall, vGetSystemCall, vNextSystemCall,
    };
    installResult = sqlite3_vfs_register(&pausingVFS, 1);
}

int pausing_vfs_install(void) {
    pthread_once(&installOnce, install);
    return installResult;
}
