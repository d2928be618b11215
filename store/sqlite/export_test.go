package sqlite

import "database/sql"

// DB is the store's single write connection, for tests that tamper with
// rows. Transactions begun on it are BEGIN IMMEDIATE.
func (s *Store) DB() *sql.DB { return s.w }

// MessagesByQuery is the query MessagesBy runs.
const MessagesByQuery = selectCommand + messagesBy
