// A caller whose rules allow only one of create and patch on a document's type: the apply is bound to
// what the read found, so the cluster refuses it when the object appeared or went away in between
// (a server-side apply itself creates or patches, whichever the object's state then calls for). Pure.

type Obj = Record<string, any>;

/**
 * A resourceVersion no object has (the largest the apiserver parses): an apply carrying it creates an
 * absent object (a create ignores it) and is refused with 409 for an existing one (it never matches).
 */
const NO_OBJECT_VERSION = '18446744073709551615';

/** What an apply was bound to: the object absent (create only), present with the uid read (patch only), or neither. */
export type Binding = 'absent' | 'present' | null;

/**
 * The object to apply and what it is bound to. A create-only caller that read no object sends a
 * resourceVersion that matches none: if the object exists by then, the cluster answers 409 instead of
 * patching it. A patch-only caller that read the object sends its uid (unless the document names one):
 * if it is gone by then, the cluster answers 409 instead of creating it.
 */
export function bindToRead(
  object: Obj,
  before: Obj | null,
  may: { create: boolean; patch: boolean },
): { object: Obj; binding: Binding } {
  if (!before && may.create && !may.patch) {
    return {
      object: { ...object, metadata: { ...object.metadata, resourceVersion: NO_OBJECT_VERSION } },
      binding: 'absent',
    };
  }
  const uid = before?.metadata?.uid;
  if (before && may.patch && !may.create && typeof uid === 'string') {
    return { object: { ...object, metadata: { uid, ...object.metadata } }, binding: 'present' };
  }
  return { object, binding: null };
}

/** Why a bound apply that the cluster refused with 409 (not a field conflict) was refused, for the result. */
export function boundRefusal(binding: Exclude<Binding, null>, what: string): string {
  return binding === 'absent'
    ? `${what} exists: it was created after it was read, and your roles allow create but not patch on it`
    : `${what} no longer exists as it was read (deleted or replaced since), and your roles allow patch but not create on it`;
}

/** The resourceVersion an answer to a bound apply shows (a dry-run create echoes the one sent): null for the sentinel. */
export function shownVersion(version: string | null): string | null {
  return version === NO_OBJECT_VERSION ? null : version;
}
