import { type Entry, itemJson } from './entries.js';

export type SortValue = string | number | boolean | null;

/** Entries in one order: (value of the path, namespace, name), the value ascending or descending. */
interface SortIndex {
  readonly path: string;
  readonly desc: boolean;
  readonly values: Map<Entry, SortValue>;
  readonly entries: Entry[];
  usedAt: number;
}

const MAX_INDEXES = 8;

/** Sort keys read from an entry's kept facts; any other path is read from its JSON. */
function keptValue(entry: Entry, path: string): SortValue | undefined {
  if (path === 'metadata.name') return entry.name;
  if (path === 'metadata.namespace') return entry.namespace || null;
  if (path === 'metadata.creationTimestamp') return entry.created;
  return undefined;
}

function valueAt(object: Record<string, any>, path: string): SortValue {
  let value: any = object;
  for (const part of path.split('.')) {
    if (value === null || typeof value !== 'object') return null;
    value = value[part];
  }
  if (value === undefined || value === null) return null;
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return value;
  return JSON.stringify(value);
}

const RANK = { boolean: 1, number: 2, string: 3 } as Record<string, number>;

/** Absent values first, then false < true, numbers, strings (code-unit order: RFC 3339 times sort by time). */
export function compareValues(a: SortValue, b: SortValue): number {
  if (a === b) return 0;
  const ra = a === null ? 0 : RANK[typeof a];
  const rb = b === null ? 0 : RANK[typeof b];
  if (ra !== rb) return ra - rb;
  return (a as string | number) < (b as string | number) ? -1 : 1;
}

const compareStrings = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function compareIn(index: SortIndex, a: Entry, va: SortValue, b: Entry, vb: SortValue): number {
  const byValue = compareValues(va, vb);
  if (byValue !== 0) return index.desc ? -byValue : byValue;
  return compareStrings(a.namespace, b.namespace) || compareStrings(a.name, b.name);
}

/** The position of `entry` (with `value`) in the index, or where it would go. */
function positionOf(index: SortIndex, entry: Entry, value: SortValue): number {
  let lo = 0;
  let hi = index.entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const other = index.entries[mid];
    if (compareIn(index, other, index.values.get(other)!, entry, value) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The sort indexes of one list cache: built on the first query of an order, then kept in order as
 * objects come and go (binary-search insert and remove); the most recently used few are kept.
 */
export class SortIndexes {
  private indexes: SortIndex[] = [];

  /** Entries in the order asked (kept from then on); ties by namespace, then name. */
  ordered(all: Iterable<Entry>, path: string, desc: boolean): readonly Entry[] {
    let index = this.indexes.find((i) => i.path === path && i.desc === desc);
    if (!index) {
      const entries = [...all];
      // The other order of the same path has the values already.
      let values = this.indexes.find((i) => i.path === path)?.values;
      if (!values) {
        values = new Map<Entry, SortValue>();
        for (const entry of entries)
          values.set(entry, keptValue(entry, path) ?? valueAt(JSON.parse(itemJson(entry, true)), path));
      }
      index = { path, desc, values, entries, usedAt: 0 };
      const built = index;
      const v = values;
      index.entries.sort((a, b) => compareIn(built, a, v.get(a)!, b, v.get(b)!));
      this.indexes.push(index);
      if (this.indexes.length > MAX_INDEXES) {
        this.indexes.sort((a, b) => b.usedAt - a.usedAt);
        this.indexes.length = MAX_INDEXES;
      }
    }
    index.usedAt = Date.now();
    return index.entries;
  }

  /** Places a new entry (`object`: what it was made of) in every index. */
  add(entry: Entry, object: Record<string, any>): void {
    for (const index of this.indexes) {
      // Both orders of a path share their values: the value is set once, the entry placed in each.
      const value = index.values.get(entry) ?? keptValue(entry, index.path) ?? valueAt(object, index.path);
      index.values.set(entry, value);
      index.entries.splice(positionOf(index, entry, value), 0, entry);
    }
  }

  remove(entry: Entry): void {
    for (const index of this.indexes) {
      const value = index.values.get(entry);
      if (value === undefined) continue;
      const at = positionOf(index, entry, value);
      if (index.entries[at] === entry) index.entries.splice(at, 1);
    }
    for (const index of this.indexes) index.values.delete(entry);
  }
}
