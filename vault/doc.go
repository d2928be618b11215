// Package vault seals per-person OAuth grants before they reach a store and
// opens them after: AES-256-GCM (crypto/cipher) under MARLOWE_SECRETS_KEY,
// each ciphertext bound as additional data to what it belongs to (platform,
// person, server), so a sealed row copied onto another person's row does not
// open. Older keys listed in MARLOWE_SECRETS_KEY_OLD still open what they
// sealed; whatever is read under an old key is sealed again under the
// current one (rotation, docs/connectors.md).
//
// It imports core only. Token material leaves this package only as a Grant,
// whose String, GoString, LogValue and MarshalJSON never show a secret.
package vault
