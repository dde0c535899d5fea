"""Brute-force twins of the word-level relations (BFS over adjacency lists, explicit loops)."""
from collections import deque

import numpy as np


def bfs_distances(heads):
    n = len(heads)
    adj = [[] for _ in range(n)]
    for i, h in enumerate(heads):
        if h > 0:
            adj[i].append(h - 1)
            adj[h - 1].append(i)
    dist = np.full((n, n), -1, dtype=np.int64)
    for s in range(n):
        dist[s, s] = 0
        q = deque([s])
        while q:
            u = q.popleft()
            for v in adj[u]:
                if dist[s, v] < 0:
                    dist[s, v] = dist[s, u] + 1
                    q.append(v)
    return dist


def brute_sla(heads, m):
    n = len(heads)
    dist = bfs_distances(heads)
    out = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(n):
            d = min(dist[k, j] for k in (i - 1, i, i + 1) if 0 <= k < n)
            out[i, j] = d <= m
    return out


def brute_ancestors(heads):
    n = len(heads)
    out = np.zeros((n, n), dtype=bool)
    for i in range(n):
        node = i + 1
        while node != 0:
            out[i, node - 1] = True
            node = heads[node - 1]
    return out
