package metadb

// MigrateTo is migrateTo, for tests of a migration.
var MigrateTo = migrateTo
