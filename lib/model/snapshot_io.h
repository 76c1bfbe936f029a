// Persisted decoder snapshots (a tools-prefix cache): a Snapshot plus the logits after it, stored
// with the key that produced it, so a later process can skip the prefix prefill. File layout
// (little-endian): "NDLSNAP1", u32 key length, key bytes, then the snapshot fields in declaration
// order, each vector as u64 element count + raw elements, then the logits the same way.
#pragma once

#include <string>
#include <vector>

#include "model/decoder.h"

namespace needle::model {

// Writes atomically (temporary file + rename). Throws IoError naming the path.
void WriteSnapshotFile(const std::string& path, const std::string& key, const Snapshot& snapshot,
                       const std::vector<float>& logits);

// Reads a snapshot written with the same key. Returns false (and leaves the outputs unspecified)
// if the file does not exist, was written for another key, or is damaged: a cache miss, never an
// error.
bool ReadSnapshotFile(const std::string& path, const std::string& key, Snapshot* snapshot,
                      std::vector<float>* logits);

}  // namespace needle::model
