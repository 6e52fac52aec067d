// The state database's schema: one migration script per version, run in order from the
// version a file has (PRAGMA user_version) up to RunStore::kSchemaVersion. Scripts are only ever
// appended; a released one is never edited, because databases in the field were built by it.
#ifndef DEPLOYD_STORE_SCHEMA_H_
#define DEPLOYD_STORE_SCHEMA_H_

#include <sqlite3.h>

#include "deployd/status.h"

namespace deployd {

// Runs the migrations from `from` up to RunStore::kSchemaVersion and records the new version,
// all in one transaction: a crash leaves the old version intact, never a half-built schema.
// On failure, sqlite's message.
Status MigrateSchema(sqlite3* db, int from);

}  // namespace deployd

#endif  // DEPLOYD_STORE_SCHEMA_H_
