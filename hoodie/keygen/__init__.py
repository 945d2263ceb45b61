"""Hudi's key generators: record keys and partition paths for Arrow tables.

``key_generator_from_properties`` picks the generator a table's ``hoodie.properties`` (or a
writer's options) describe; ``key_generator_properties`` gives the entries that record one
when creating a table. See :mod:`hoodie.keygen.generators` for the key formats and
:mod:`hoodie.keygen.partition_path` for partition-path escaping and parsing.
"""

from __future__ import annotations

from hoodie.keygen.factory import key_generator_from_properties, key_generator_properties
from hoodie.keygen.generators import (
    ComplexKeyEncoding,
    ComplexKeyGenerator,
    CustomKeyGenerator,
    KeyGenerator,
    KeyGeneratorType,
    NonpartitionedKeyGenerator,
    PartitionKeyType,
    SimpleKeyGenerator,
    TimestampBasedKeyGenerator,
    virtual_record_keys,
)
from hoodie.keygen.timestamp import TimestampOptions, TimestampType, TimeUnit
from hoodie.keygen.values import FloatDigits, ValueFormat

__all__ = [
    "ComplexKeyEncoding",
    "ComplexKeyGenerator",
    "CustomKeyGenerator",
    "FloatDigits",
    "KeyGenerator",
    "KeyGeneratorType",
    "NonpartitionedKeyGenerator",
    "PartitionKeyType",
    "SimpleKeyGenerator",
    "TimeUnit",
    "TimestampBasedKeyGenerator",
    "TimestampOptions",
    "TimestampType",
    "ValueFormat",
    "key_generator_from_properties",
    "key_generator_properties",
    "virtual_record_keys",
]
