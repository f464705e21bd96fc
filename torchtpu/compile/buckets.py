"""placeholder"""
def parse(spec):
    return None
