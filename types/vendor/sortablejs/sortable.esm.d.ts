// SortableJS (1.15.7, package.json), as custom/drag.js imports it: static/vendor/ is filled at
// collection time (telescope_ui/assets.py), so tsc finds this declaration in its place
// (tsconfig.json rootDirs: static/ and types/ are one tree). Only what the Custom view uses.

export interface SortableEvent {
  item: HTMLElement;
  clone: HTMLElement;
  from: HTMLElement;
  to: HTMLElement;
  oldDraggableIndex?: number;
  pullMode?: 'clone' | boolean;
}

export interface SortableOptions {
  group?: string | { name: string; pull?: boolean | 'clone' | ((...args: any[]) => boolean | 'clone');
    put?: boolean | string[] | ((to: Sortable, from: Sortable, el: HTMLElement) => boolean) };
  sort?: boolean;
  draggable?: string;
  handle?: string;
  animation?: number;
  forceFallback?: boolean;
  fallbackOnBody?: boolean;
  fallbackTolerance?: number;
  delay?: number;
  delayOnTouchOnly?: boolean;
  invertSwap?: boolean;
  emptyInsertThreshold?: number;
  filter?: string;
  preventOnFilter?: boolean;
  ghostClass?: string;
  chosenClass?: string;
  fallbackClass?: string;
  direction?: 'vertical' | 'horizontal' | ((evt: Event, target: HTMLElement) => 'vertical' | 'horizontal');
  onUnchoose?: (evt: SortableEvent) => void;
  onStart?: (evt: SortableEvent) => void;
  onEnd?: (evt: SortableEvent) => void;
  [option: string]: unknown;
}

export default class Sortable {
  static create(el: HTMLElement, options?: SortableOptions): Sortable;
  /** The instance being dragged from, the element dragged: null between drags. */
  static active: Sortable | null;
  static dragged: HTMLElement | null;
  el: HTMLElement;
  destroy(): void;
  option(name: string, value?: unknown): unknown;
}
