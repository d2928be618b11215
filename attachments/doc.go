// Package attachments turns the files people share into model input
// (core.AttachmentReader): it fetches each through the surface's
// core.AttachmentFetcher under a size cap, sniffs the type from the bytes
// (never the name), and then
//
//   - downscales images to a long side of at most 1568 px and re-encodes
//     them, after checking their dimensions with image.DecodeConfig so a
//     decompression bomb is refused before any pixel is decoded;
//   - inlines text-like files (text/*, JSON, CSV, YAML, logs, source),
//     keeping head and tail past a bound with a note of what was cut;
//   - extracts a PDF's text layer (github.com/ledongthuc/pdf), bounded by
//     pages and size, and says so when a PDF has none (a scan);
//   - transcribes voice and audio through an OpenAI-compatible
//     /v1/audio/transcriptions endpoint, or says no transcriber is set.
//
// Anything it cannot read becomes a note the model and the person see;
// nothing is dropped silently. It imports core only; the engine never
// sees a file format.
package attachments
