//! A small corpus shared by the integration tests: six short articles, two of them linked
//! by a multi-hop question (Curie → Warsaw → Vistula).

use lprag::Document;

/// Six documents, one passage each.
pub fn corpus() -> Vec<Document> {
    vec![
        Document::new(
            "curie",
            "Marie Curie",
            "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903.",
        ),
        Document::new(
            "warsaw",
            "Warsaw",
            "Warsaw is the capital of Poland. The city lies on the Vistula River.",
        ),
        Document::new(
            "nobel",
            "Alfred Nobel",
            "Alfred Nobel invented dynamite in 1867. He was born in Stockholm.",
        ),
        Document::new(
            "tokyo",
            "Tokyo",
            "Tokyo is the capital of Japan. The Sumida River flows through the city.",
        ),
        Document::new(
            "kyoto",
            "Kyoto",
            "Kyoto was the imperial capital of Japan for over a thousand years.",
        ),
        Document::new(
            "everest",
            "Mount Everest",
            "Mount Everest is the highest mountain above sea level, in the Himalayas.",
        ),
    ]
}
