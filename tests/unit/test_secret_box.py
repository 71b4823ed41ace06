"""The keyring of variable and connection values: the first key encrypts, every key decrypts, a
rotation re-encrypts with the new first key, and a tampered value or a bad key is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedd_auth.secret_box import KEYS_ENV, KEYS_FILE_ENV, SecretBox, SecretKeyError, new_key


def test_the_first_key_encrypts_and_every_key_decrypts() -> None:
    old, new = new_key(), new_key()
    stored = SecretBox([old]).encrypt("s3cret")
    assert b"s3cret" not in stored
    rotated_ring = SecretBox([new, old])
    assert rotated_ring.decrypt(stored) == "s3cret"
    with pytest.raises(SecretKeyError, match="does not decrypt"):
        SecretBox([new]).decrypt(stored)


def test_rotation_re_encrypts_with_the_new_key_so_the_old_key_can_go() -> None:
    old, new = new_key(), new_key()
    stored = SecretBox([old]).encrypt("value")
    rotated = SecretBox([new, old]).rotate(stored)
    assert SecretBox([new]).decrypt(rotated) == "value"
    with pytest.raises(SecretKeyError):
        SecretBox([old]).decrypt(rotated)


def test_a_tampered_value_does_not_decrypt() -> None:
    box = SecretBox([new_key()])
    stored = bytearray(box.encrypt("value"))
    stored[-5] ^= 1
    with pytest.raises(SecretKeyError):
        box.decrypt(bytes(stored))


def test_keys_come_from_the_environment_or_a_file(tmp_path: Path) -> None:
    first, second = new_key(), new_key()
    assert SecretBox.from_env({}) is None
    from_env = SecretBox.from_env({KEYS_ENV: f"{first}, {second}"})
    assert from_env is not None and SecretBox([first]).decrypt(from_env.encrypt("x")) == "x"
    path = tmp_path / "keys"
    path.write_text(f"# newest first\n{second}\n{first}\n")
    from_file = SecretBox.from_env({KEYS_FILE_ENV: str(path), KEYS_ENV: first})
    assert from_file is not None
    assert SecretBox([second]).decrypt(from_file.encrypt("x")) == "x"  # the file wins, its first key encrypts


@pytest.mark.parametrize("keys", [["not-a-key"], [new_key(), "short"]])
def test_a_bad_key_is_refused_naming_which(keys: list[str]) -> None:
    with pytest.raises(SecretKeyError, match=f"encryption key {len(keys)} is not a Fernet key"):
        SecretBox(keys)


def test_a_missing_key_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SecretKeyError, match=KEYS_FILE_ENV):
        SecretBox.from_env({KEYS_FILE_ENV: str(tmp_path / "absent")})
