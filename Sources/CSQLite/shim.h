#ifndef TXGATE_CSQLITE_SHIM_H
#define TXGATE_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a function-pointer cast macro that Swift cannot import; these bind with
   it so that SQLite copies the bytes before the Swift buffer goes away. */
static inline int txg_sqlite3_bind_text_transient(sqlite3_stmt *stmt, int index, const char *text, int length) {
    return sqlite3_bind_text(stmt, index, text, length, SQLITE_TRANSIENT);
}
static inline int txg_sqlite3_bind_blob_transient(sqlite3_stmt *stmt, int index, const void *bytes, int length) {
    return sqlite3_bind_blob(stmt, index, bytes, length, SQLITE_TRANSIENT);
}
/* SQLite's memory statistics (on by default) take a process-wide mutex around every allocation
   and free; txgate reads none of them. sqlite3_config is variadic, which Swift cannot call, and
   only works before SQLite is first initialized (otherwise SQLITE_MISUSE, and the statistics stay
   on: slower, not wrong). */
static inline int txg_sqlite3_disable_memstatus(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
#endif
