#include "planner/sha256.h"

#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_main.h"

static void expect(const char *data, size_t len, const char *want)
{
    char hex[65];
    ck_sha256_hex(data, len, hex);
    ck_assert_str_eq(hex, want);
}

/* Test vectors of FIPS 180-2 appendix B and the padding boundaries around 55/56/64 bytes. */
START_TEST(fips_vectors)
{
    expect("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    expect(two_blocks, strlen(two_blocks),
           "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    size_t n = 1000000;
    char *million = malloc(n);
    ck_assert_ptr_nonnull(million);
    memset(million, 'a', n);
    expect(million, n, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
}
END_TEST

START_TEST(padding_boundaries)
{
    char a[64];
    memset(a, 'a', sizeof a);
    expect(a, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    expect(a, 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    expect(a, 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}
END_TEST

static Suite *sha256_suite(void)
{
    Suite *s = suite_create("sha256");
    TCase *tc = tcase_create("sha256");
    tcase_add_test(tc, fips_vectors);
    tcase_add_test(tc, padding_boundaries);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(sha256_suite)
