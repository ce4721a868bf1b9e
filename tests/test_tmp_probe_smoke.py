import pytest
@pytest.mark.ray
def test_a(ray_cluster):
    print(__name__, ray_cluster.gcs_address)
