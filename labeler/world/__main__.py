"""`python -m labeler.world`: train the world model into the cache (once) and print its folder."""

from labeler.world.cache import ensure_world_model

if __name__ == "__main__":
    print(ensure_world_model())
