from tests.zookeeper_fixture import zookeeper_connect, zookeeper_server

__all__ = ["zookeeper_connect", "zookeeper_server"]
