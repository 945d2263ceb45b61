"""Table services as Spark jobs.

Importing ``jobs`` gives hoodie's FileIO S3's conditional PUT (:mod:`jobs.objectstore`), in the CLI,
the daemon and every Spark executor alike.
"""

from jobs.objectstore import install as _install_object_store

_install_object_store()
