/* MHA_API marks the library's public symbols; everything else is hidden
 * (-fvisibility=hidden). Define MHA_STATIC_DEFINE to make it expand to nothing.
 * Included by every public header. */
#ifndef MHA_EXPORT_H
#define MHA_EXPORT_H

#if defined(MHA_STATIC_DEFINE)
#define MHA_API
#elif defined(__GNUC__)
#define MHA_API __attribute__((visibility("default")))
#else
#define MHA_API
#endif

#endif /* MHA_EXPORT_H */
