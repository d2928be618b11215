package signin_test

import "encoding/base64"

func base64Decode(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
func base64Encode(s string) string          { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
