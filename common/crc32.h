// CRC-32 (IEEE 802.3, the zlib/PNG polynomial), for checksums of files dsdoctor writes
// (checkpoints). Pure; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsd {

// Continues a running checksum: Crc32(b, n2, Crc32(a, n1)) == Crc32(a+b). Start with 0.
uint32_t Crc32(const void* data, size_t size, uint32_t crc = 0);

}  // namespace dsd
