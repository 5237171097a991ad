"""Units and bounds of the balancer's numbers.

Inside the core: usage is a ``Fraction`` (1.0 = 100 %), rates are msg/s, throughputs bytes/s, times
seconds since the epoch. Reference configuration keeps its own units only at the edges.
"""

from typing import Final, TypeAlias

HASH_MIN: Final = 0x00000000
HASH_MAX: Final = 0xFFFFFFFF
HASH_SPACE: Final = 1 << 32
MIB: Final = 1024 * 1024  # Pulsar's "MB" in thresholds is a MiB

HashPoint: TypeAlias = int  # 0..HASH_MAX
Fraction: TypeAlias = float  # 1.0 = 100 %
MsgPerSec: TypeAlias = float
BytesPerSec: TypeAlias = float
Seconds: TypeAlias = float
BrokerId: TypeAlias = str
